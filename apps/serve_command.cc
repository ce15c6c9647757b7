// `kvault serve`: the llama-server-compatible HTTP server. The listener
// comes up first (so /health can say "loading"), then the model is loaded
// (or the demo model generated in memory), then the engine starts. SIGINT
// and SIGTERM are taken with sigwait on the main thread (blocked in every
// other thread), so shutdown runs in ordinary code, not in a handler.
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/flags.h"
#include "core/log.h"
#include "engine/engine.h"
#include "model/demo_model.h"
#include "model/llama_model.h"
#include "server/http_server.h"
#include "server/slot_filename.h"

namespace kvault::apps {
namespace {

constexpr const char kServeUsage[] =
    "usage: kvault serve [-m MODEL.gguf] [-c N_CTX_TOTAL] [-np N_SLOTS]\n"
    "         [--ctx-per-slot N] [--page-size P] [--cache-type-k T]\n"
    "         [--cache-type-v T] [--kv-policy paged|contiguous|"
    "contiguous+defrag]\n"
    "         [--slot-save-path DIR] [--spill-ram BYTES] [--spill-dir DIR\n"
    "         --spill-disk BYTES] [--host H] [--port P] [--api-key KEY]\n"
    "         [-t THREADS] [--prefill-chunk N] [--no-fsync] [--mmap]\n"
    "         [--on-kv-full refuse|drop-lru] [--slot-io-timeout SECONDS]\n"
    "         [--threads-http N] [--timeout S] [--prefill-share X]\n"
    "  Without -m an embedded DEMO model (random weights, byte vocabulary,\n"
    "  generated in memory) is served: its output is gibberish.\n"
    "  -c N             KV cells shared by all slots (default 4096)\n"
    "  -np N            slots (default 4)\n"
    "  --ctx-per-slot N most cells one slot may hold (default: min(-c, the\n"
    "                   model's context length))\n"
    "  --page-size P    cells per KV page (default 16)\n"
    "  --cache-type-k/-v  f16 (default), f32 or q8_0; K and V must match\n"
    "  --kv-policy      placement policy (default paged)\n"
    "  --slot-save-path DIR  enables POST /slots/{id}?action=save|restore;\n"
    "                   created at start-up when missing (its parent must\n"
    "                   exist); temporary files of interrupted saves in it\n"
    "                   are removed at start-up\n"
    "  --slot-io-timeout S  a slot save/restore whose file I/O takes longer\n"
    "                   fails with 503 io_timeout (default 30; 1..3600)\n"
    "  --spill-ram B    host-RAM tier for idle slots' KV (default: the KV\n"
    "                   pool's size; 0 disables); B accepts K/M/G suffixes\n"
    "  --spill-dir DIR --spill-disk B  disk tier below the RAM tier\n"
    "  --on-kv-full P   when the pool is full and no tier can take an idle\n"
    "                   slot's KV: refuse (default; the request needing room\n"
    "                   gets 503 kv_full) or drop-lru (drop the least\n"
    "                   recently used idle slot's KV, counted in /metrics\n"
    "                   and marked in /slots)\n"
    "  --host H --port P   listen address (default 127.0.0.1:8080; port 0\n"
    "                   picks a free one, printed in the log)\n"
    "  --api-key KEY    require 'Authorization: Bearer KEY' (not /health)\n"
    "  --threads-http N HTTP worker threads = connections served at once\n"
    "                   (default 64); more connections get 503 at once\n"
    "  --timeout S      seconds a request body may take to arrive and a\n"
    "                   response write may stall (default 60; 408 / drop)\n"
    "  --prefill-share X  while other slots generate, a step's prompt chunk\n"
    "                   is sized to cost at most X decode steps (default\n"
    "                   0.4: their inter-token latency rises ~1.2x; larger\n"
    "                   prefills faster; 0: fixed --prefill-chunk chunks)\n"
    "  -t THREADS       forward-pass threads (default: all cores)\n";

// The usage text printed by --help and after a bad flag.
std::string ServeUsage() {
  return std::string(kServeUsage) + kLoadModeUsage;
}

struct ServeOptions {
  std::string model_path;  // empty: the demo model
  EngineOptions engine;
  ServerOptions server;
  bool spill_ram_given = false;
  LoadMode load_mode = LoadMode::kRead;
};

// Parses "123", "64K", "512M", "4G" (powers of 1024) into bytes.
StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& s) {
  static const std::map<char, uint64_t> kUnits = {
      {'K', 1ull << 10}, {'M', 1ull << 20}, {'G', 1ull << 30},
      {'T', 1ull << 40}};
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(s, &used);
  } catch (...) {
    used = 0;
  }
  uint64_t unit = 1;
  if (used > 0 && used + 1 == s.size()) {
    auto it = kUnits.find(static_cast<char>(std::toupper(s.back())));
    if (it != kUnits.end()) unit = it->second, ++used;
  }
  if (used == 0 || used != s.size() || s[0] == '-' ||
      value > UINT64_MAX / unit) {
    return InvalidArgumentError("--" + flag + ": expected a byte count like "
                                "1048576, 64K, 512M or 4G, got '" + s + "'");
  }
  return value * unit;
}

// Reads the KV element type from --cache-type-k / --cache-type-v.
StatusOr<KvDtype> ParseCacheType(const Flags& f) {
  const std::string k = f.GetString("cache-type-k", "f16");
  const std::string v = f.GetString("cache-type-v", k);
  if (k != v) {
    return InvalidArgumentError("--cache-type-k " + k + " and --cache-type-v " +
                                v + " differ; kvault stores K and V in one "
                                "element type");
  }
  return ParseDtype(k);
}

Status ParseEngineFlags(const Flags& f, EngineOptions* e) {
  KV_ASSIGN_OR_RETURN(uint64_t ctx, f.GetUint("ctx-size", 4096, 1, 1u << 26));
  KV_ASSIGN_OR_RETURN(uint64_t np, f.GetUint("parallel", 4, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t per_slot,
                      f.GetUint("ctx-per-slot", 0, 0, 1u << 26));
  KV_ASSIGN_OR_RETURN(uint64_t page, f.GetUint("page-size", 16, 1, 4096));
  KV_ASSIGN_OR_RETURN(uint64_t threads, f.GetUint("threads", 0, 0, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t chunk,
                      f.GetUint("prefill-chunk", 256, 1, 1u << 20));
  KV_ASSIGN_OR_RETURN(e->cache_type, ParseCacheType(f));
  e->n_ctx_total = static_cast<uint32_t>(ctx);
  e->n_slots = static_cast<uint32_t>(np);
  e->ctx_per_slot = static_cast<uint32_t>(per_slot);
  e->page_size = static_cast<uint32_t>(page);
  e->num_threads = static_cast<uint32_t>(threads);
  e->prefill_chunk = static_cast<uint32_t>(chunk);
  KV_ASSIGN_OR_RETURN(e->prefill_step_share,
                      f.GetDouble("prefill-share", e->prefill_step_share));
  if (!(e->prefill_step_share >= 0 && e->prefill_step_share <= 64)) {
    return InvalidArgumentError("--prefill-share " +
                                std::to_string(e->prefill_step_share) +
                                " is outside [0, 64]");
  }
  e->kv_policy = f.GetString("kv-policy", "paged");
  e->spill_dir = f.GetString("spill-dir", "");
  e->sync_saves = !f.Has("no-fsync");
  KV_ASSIGN_OR_RETURN(e->on_kv_full,
                      ParseOnKvFull(f.GetString("on-kv-full", "refuse")));
  KV_ASSIGN_OR_RETURN(uint64_t io_timeout,
                      f.GetUint("slot-io-timeout", 30, 1, 3600));
  e->slot_io_timeout_ms = static_cast<uint32_t>(io_timeout * 1000);
  if (f.Has("spill-ram")) {
    KV_ASSIGN_OR_RETURN(e->spill_ram_bytes,
                        ParseBytes("spill-ram", f.GetString("spill-ram", "")));
  }
  if (f.Has("spill-disk")) {
    KV_ASSIGN_OR_RETURN(e->spill_disk_bytes, ParseBytes("spill-disk",
                        f.GetString("spill-disk", "")));
  }
  if (e->spill_disk_bytes > 0 && e->spill_dir.empty()) {
    return InvalidArgumentError("--spill-disk needs --spill-dir DIR");
  }
  return e->Validate();
}

StatusOr<ServeOptions> ParseServe(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown(
      {"model", "ctx-size", "parallel", "ctx-per-slot", "page-size",
       "cache-type-k", "cache-type-v", "kv-policy", "slot-save-path",
       "spill-ram", "spill-dir", "spill-disk", "host", "port", "api-key",
       "threads", "prefill-chunk", "no-fsync", "mmap", "no-mmap",
       "on-kv-full", "slot-io-timeout", "threads-http", "timeout",
       "prefill-share"}));
  if (!f.positional().empty()) {
    return InvalidArgumentError("unexpected argument '" + f.positional()[0] +
                                "'");
  }
  ServeOptions o;
  o.model_path = f.GetString("model", "");
  KV_RETURN_IF_ERROR(ParseEngineFlags(f, &o.engine));
  o.spill_ram_given = f.Has("spill-ram");
  KV_ASSIGN_OR_RETURN(uint64_t port, f.GetUint("port", 8080, 0, 65535));
  o.server.host = f.GetString("host", "127.0.0.1");
  o.server.port = static_cast<uint16_t>(port);
  o.server.api_key = f.GetString("api-key", "");
  KV_ASSIGN_OR_RETURN(uint64_t http_threads,
                      f.GetUint("threads-http", 64, 1, 4096));
  KV_ASSIGN_OR_RETURN(uint64_t timeout_s, f.GetUint("timeout", 60, 1, 86400));
  o.server.max_connections = static_cast<uint32_t>(http_threads);
  o.server.body_timeout_ms = static_cast<uint32_t>(timeout_s * 1000);
  o.server.write_timeout_ms = o.server.body_timeout_ms;
  o.server.slot_save_path = f.GetString("slot-save-path", "");
  o.server.model_path = o.model_path.empty() ? "demo" : o.model_path;
  o.server.demo_model = o.model_path.empty();
  return o;
}

StatusOr<std::unique_ptr<LlamaModel>> LoadModel(const ServeOptions& o) {
  if (o.model_path.empty()) {
    KV_LOG(WARNING) << "no -m MODEL given: serving the embedded DEMO model "
                       "(random weights, byte vocabulary; output is "
                       "gibberish)";
    return GenerateModelInMemory(DemoModelOptions());
  }
  KV_LOG(INFO) << "loading model " << o.model_path;
  return LlamaModel::Load(o.model_path, o.load_mode);
}

// Sets the RAM tier's default: room to spill the whole pool once.
void DefaultSpillRam(const LlamaModel& model, ServeOptions* o) {
  if (o->spill_ram_given) return;
  const KvLayout layout = model.KvLayoutFor(o->engine.cache_type);
  o->engine.spill_ram_bytes =
      uint64_t{o->engine.n_ctx_total} * layout.cell_bytes() + (1u << 20);
}

// Blocks SIGINT and SIGTERM in this thread and every thread it starts.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Fail(const Status& status) {
  std::fprintf(stderr, "kvault serve: %s\n", status.ToString().c_str());
  return 1;
}

int Serve(ServeOptions o) {
  const sigset_t stop_signals = BlockStopSignals();
  if (!o.server.slot_save_path.empty()) {
    Status dir = PrepareSlotSaveDir(Env::Default(), o.server.slot_save_path);
    if (!dir.ok()) return Fail(dir);
  }
  auto server = HttpServer::Start(o.server);
  if (!server.ok()) return Fail(server.status());
  KV_LOG(INFO) << "listening on http://" << o.server.host << ":"
               << (*server)->port();
  (*server)->SetLoadProgress(0.0);
  auto model = LoadModel(o);
  if (!model.ok()) return Fail(model.status());
  (*server)->SetLoadProgress(1.0);
  DefaultSpillRam(**model, &o);
  auto engine = Engine::Create(std::move(*model), o.engine);
  if (!engine.ok()) return Fail(engine.status());
  (*server)->SetEngine(engine->get());
  KV_LOG(INFO) << "ready: " << o.engine.n_slots << " slots, "
               << o.engine.n_ctx_total << " KV cells ("
               << o.engine.kv_policy << ", page size " << o.engine.page_size
               << ")" << (o.server.demo_model ? ", DEMO model" : "");
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  KV_LOG(INFO) << "signal " << signal_number << ": shutting down";
  (*server)->Stop();
  (*engine)->Shutdown();
  KV_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(ServeUsage().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> expanded = ExpandShortFlags(
      args, {{"-m", "model"}, {"-c", "ctx-size"}, {"-np", "parallel"},
             {"-t", "threads"}, {"-ctk", "cache-type-k"},
             {"-ctv", "cache-type-v"}});
  auto flags = Flags::Parse(expanded, {"no-fsync", "mmap", "no-mmap"});
  if (!flags.ok()) return Fail(flags.status());
  auto options = ParseServe(*flags);
  if (!options.ok()) {
    std::fprintf(stderr, "kvault serve: %s\n%s",
                 options.status().ToString().c_str(), ServeUsage().c_str());
    return 2;
  }
  return Serve(std::move(*options));
}

}  // namespace kvault::apps
