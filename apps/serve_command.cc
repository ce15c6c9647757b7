// `kvault serve`: the llama-server-compatible HTTP server. The listener
// comes up first (so /health can say "loading"), then the model is loaded
// (or the demo model generated in memory), then the engine starts. SIGINT
// and SIGTERM are taken with sigwait on the main thread (blocked in every
// other thread), so shutdown runs in ordinary code, not in a handler.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/serve_options.h"
#include "core/allocator_tuning.h"
#include "core/cpu_features.h"
#include "core/embedded_file.h"
#include "core/log.h"
#include "core/version.h"
#include "engine/engine.h"
#include "kv/kv_policy.h"
#include "model/compute_backend.h"
#include "model/demo_model.h"
#include "model/gguf_file.h"
#include "model/kernels/kernels.h"
#include "model/llama_model.h"
#include "server/engine_host.h"
#include "server/http_server.h"
#include "server/slot_filename.h"

namespace kvault::apps {

// Defined by the file cmake/kvault_embed.cmake generates (apps/CMakeLists).
std::span<const EmbeddedFile> DefaultModelFiles();

namespace {

// Parses the model compiled into the binary (a copy: the GGUF reader owns
// its bytes).
StatusOr<std::unique_ptr<LlamaModel>> LoadEmbeddedModel(const ServeOptions& o) {
  const EmbeddedFile* file =
      FindEmbeddedFile(DefaultModelFiles(), kEmbeddedModelFile);
  if (file == nullptr) {
    return InternalError("the embedded model is missing from this build");
  }
  auto bytes = std::make_shared<const std::string>(file->data);
  KV_ASSIGN_OR_RETURN(auto gguf, GgufFile::FromBuffer(std::move(bytes)));
  return LlamaModel::FromGguf(std::move(gguf), o.engine.compute.isa);
}

StatusOr<std::unique_ptr<LlamaModel>> LoadModel(const ServeOptions& o) {
  if (o.model_path.empty() && o.demo_random) {
    KV_LOG(WARNING) << "--demo-random: serving the DEMO model (random "
                       "weights, byte vocabulary; output is gibberish)";
    return GenerateModelInMemory(DemoModelOptions());
  }
  if (o.model_path.empty()) {
    KV_LOG(INFO) << "no -m MODEL given: serving " << kEmbeddedModelLabel;
    return LoadEmbeddedModel(o);
  }
  KV_LOG(INFO) << "loading model " << o.model_path;
  return LlamaModel::Load(o.model_path, o.load_mode, o.engine.compute.isa);
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

// Returns the engine's keeper when the server may sleep, else null (the
// engine stays in `engine`). The host reloads with the options resolved
// at the first load, so a woken engine is the same shape.
std::unique_ptr<EngineHost> MaybeHost(const ServeOptions& o,
                                      std::unique_ptr<Engine>& engine) {
  if (o.server.sleep_idle_seconds == 0) return nullptr;
  auto load = [o]() -> StatusOr<std::unique_ptr<Engine>> {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, LoadModel(o));
    return Engine::Create(std::move(model), o.engine);
  };
  return std::make_unique<EngineHost>(
      std::move(engine), load,
      std::chrono::seconds(o.server.sleep_idle_seconds));
}

int Fail(const Status& status) {
  std::fprintf(stderr, "kvault serve: %s\n", status.ToString().c_str());
  return 1;
}

int Serve(ServeOptions o) {
  TuneAllocatorForServing();
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
  ResolveContext((*model)->hparams().n_ctx_train, &o);
  DefaultSpillRam(**model, &o);
  auto engine = Engine::Create(std::move(*model), o.engine);
  if (!engine.ok()) return Fail(engine.status());
  std::unique_ptr<EngineHost> host = MaybeHost(o, *engine);
  if (host != nullptr) {
    (*server)->SetEngineHost(host.get());
  } else {
    (*server)->SetEngine(engine->get());
  }
  KV_LOG(INFO) << "ready: " << o.engine.n_slots << " slots, "
               << o.engine.n_ctx_total << " KV cells ("
               << KvPolicyName(o.engine.kv_policy) << ", page size "
               << o.engine.page_size << ")"
               << (o.server.demo_model ? ", DEMO model" : "");
  if (o.engine.cache_idle_slots) {
    KV_LOG(INFO) << "idle slots' KV moves to the spill tiers when another "
                    "slot starts a task (--cache-idle-slots)";
    // The line llama.cpp's server tests look for in a verbose log.
    KV_LOG(DEBUG) << "__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__";
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  KV_LOG(INFO) << "signal " << signal_number << ": shutting down";
  (*server)->Stop();
  if (host != nullptr) host->Shutdown();
  if (*engine != nullptr) (*engine)->Shutdown();
  KV_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  auto options = ParseServeOptions(
      args, [](const char* name) { return std::getenv(name); });
  if (!options.ok()) {
    std::fprintf(stderr, "kvault serve: %s\n(kvault serve --help lists every flag)\n",
                 options.status().ToString().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(ServeHelp().c_str(), stdout);
    return 0;
  }
  if (options->version) {
    std::printf("kvault %s (llama-server b10573 command line and API)\n",
                kKvaultVersion);
    return 0;
  }
  SetMinLogLevel(options->log_level);
  for (const std::string& w : options->warnings) KV_LOG(WARNING) << w;
  // The only read of the compute environment (KVAULT_COMPUTE_POOL; the
  // CPU features, capped by KVAULT_KERNELS, are core/cpu_features.h's):
  // the model's layout and every engine (a woken one too) follow it.
  options->engine.compute = ComputeBackendOptions::FromEnvironment();
  KV_LOG(INFO) << "kernels: " << kernels::IsaName(options->engine.compute.isa)
               << " (CPU features in use: "
               << CpuFeaturesString(CpuFeaturesInUse()) << ")";
  return Serve(std::move(*options));
}

}  // namespace kvault::apps
