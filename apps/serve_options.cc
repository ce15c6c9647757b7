#include "apps/serve_options.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>

#include "core/env.h"
#include "core/record_mac.h"
#include "kv/disk_page_store.h"
#include "kv/kv_policy.h"
#include "server/chat_format.h"
#include "server/chat_template.h"
#include "server/server_args.h"

namespace kvault::apps {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr uint32_t kAutoSlots = 4;  // llama-server's -np -1

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
    return InvalidArgumentError("--" + flag +
                                ": expected a byte count like "
                                "1048576, 64K, 512M or 4G, got '" +
                                s + "'");
  }
  return value * unit;
}

// Splits "a,b,c" into its non-empty parts.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

StatusOr<KvDtype> ParseCacheType(const Flags& f) {
  const std::string k = f.GetString("cache-type-k", "f16");
  const std::string v = f.GetString("cache-type-v", k);
  if (k != v) {
    return InvalidArgumentError("--cache-type-k " + k +
                                " and --cache-type-v " + v +
                                " differ; kvault stores K and V in one "
                                "element type");
  }
  return ParseDtype(k);
}

// -c, -np, --kv-unified, --ctx-per-slot, -t, -b, -ub.
Status ParseShape(const Flags& f, ServeOptions* o) {
  EngineOptions& e = o->engine;
  KV_ASSIGN_OR_RETURN(int64_t ctx, f.GetInt("ctx-size", 0, 0, 1 << 26));
  KV_ASSIGN_OR_RETURN(int64_t np, f.GetInt("parallel", -1, -1, 1024));
  if (np == 0) return InvalidArgumentError("flag --parallel: 0 slots");
  KV_ASSIGN_OR_RETURN(bool unified, f.GetBool("kv-unified", false));
  o->n_ctx = static_cast<uint64_t>(ctx);
  o->kv_unified = unified || np < 0;
  e.n_slots = np < 0 ? kAutoSlots : static_cast<uint32_t>(np);
  KV_ASSIGN_OR_RETURN(e.ctx_per_slot,
                      f.GetUint("ctx-per-slot", 0, 0, 1u << 26));
  KV_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", -1, -1, 1024));
  e.num_threads = threads <= 0 ? 0 : static_cast<uint32_t>(threads);
  KV_ASSIGN_OR_RETURN(int64_t batch, f.GetInt("batch-size", 256, 1, 1 << 20));
  KV_ASSIGN_OR_RETURN(int64_t ubatch,
                      f.GetInt("ubatch-size", 512, 1, 1 << 20));
  e.prefill_chunk = static_cast<uint32_t>(batch);
  e.max_batch_tokens = static_cast<uint32_t>(ubatch);
  KV_ASSIGN_OR_RETURN(e.context_shift, f.GetBool("context-shift", false));
  KV_ASSIGN_OR_RETURN(bool cont, f.GetBool("cont-batching", true));
  if (!cont) {
    return InvalidArgumentError(
        "flag --no-cont-batching is not supported by kvault: it always "
        "batches the slots' steps together");
  }
  return Status::Ok();
}

// --cache-idle-slots: llama-server's default is on, and it pairs with its
// prompt cache (--cache-ram), so a launch line naming --cache-ram gets it;
// kvault's own tiers (--spill-ram) leave idle KV in the pool until room
// is needed. Like llama-server, it needs a unified cache and a RAM tier.
Status ParseCacheIdleSlots(const Flags& f, ServeOptions* o) {
  KV_ASSIGN_OR_RETURN(bool on,
                      f.GetBool("cache-idle-slots", f.Has("cache-ram")));
  EngineOptions& e = o->engine;
  if (on && !o->kv_unified) {
    o->warnings.push_back(
        "--cache-idle-slots needs --kv-unified (a slot's own share of the "
        "pool frees nothing for the others): off");
    on = false;
  } else if (on && o->spill_ram_given && e.spill_ram_bytes == 0) {
    o->warnings.push_back("--cache-idle-slots needs --cache-ram: off");
    on = false;
  }
  e.cache_idle_slots = on;
  return Status::Ok();
}

// Returns the secret named by --NAME-file or --NAME-env (one of them, at
// most), one trailing newline dropped; "" when neither is given.
StatusOr<std::string> ReadSecret(const Flags& f, const std::string& name) {
  const std::string file = name + "-file", var = name + "-env";
  if (f.Has(file) && f.Has(var)) {
    return InvalidArgumentError("--" + file + " and --" + var +
                                " both give it; give one");
  }
  std::string secret;
  if (f.Has(file)) {
    StatusOr<std::string> read =
        ReadFileToString(Env::Default(), f.GetString(file, ""));
    if (!read.ok()) return read.status().WithContext("--" + file);
    secret = std::move(*read);
  } else if (f.Has(var)) {
    const char* value = std::getenv(f.GetString(var, "").c_str());
    if (value == nullptr) {
      return InvalidArgumentError("--" + var + ": environment variable '" +
                                  f.GetString(var, "") + "' is not set");
    }
    secret = value;
  }
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  return secret;
}

// --kv-store-key-file / -env, --kv-store-unauthenticated, --kv-store-user,
// --kv-store-password-file / -env (secrets never on the command line).
Status ParseStoreAuth(const Flags& f, EngineOptions* e) {
  KV_ASSIGN_OR_RETURN(std::string key, ReadSecret(f, "kv-store-key"));
  if (f.Has("kv-store-key-file") || f.Has("kv-store-key-env")) {
    KV_ASSIGN_OR_RETURN(RecordMac mac,
                        RecordMac::FromKey(std::move(key), "--kv-store-key"));
    e->store_mac = std::make_shared<const RecordMac>(std::move(mac));
  }
  KV_ASSIGN_OR_RETURN(e->kv_store_unauthenticated,
                      f.GetBool("kv-store-unauthenticated", false));
  if (e->store_mac != nullptr && e->kv_store_unauthenticated) {
    return InvalidArgumentError(
        "--kv-store-unauthenticated contradicts the store key given");
  }
  e->kv_store_user = f.GetString("kv-store-user", "");
  KV_ASSIGN_OR_RETURN(e->kv_store_password,
                      ReadSecret(f, "kv-store-password"));
  if (!e->kv_store_user.empty() && e->kv_store_password.empty()) {
    return InvalidArgumentError(
        "--kv-store-user needs its password: --kv-store-password-file FILE "
        "or --kv-store-password-env VAR");
  }
  return Status::Ok();
}

// --spill-ram, --cache-ram (MiB; -1 no limit), --spill-dir, --spill-disk,
// --prefix-disk, --kv-store.
Status ParseTiers(const Flags& f, ServeOptions* o) {
  EngineOptions& e = o->engine;
  if (f.Has("spill-ram") && f.Has("cache-ram")) {
    return InvalidArgumentError(
        "--spill-ram and --cache-ram both size the RAM tier; give one");
  }
  if (f.Has("spill-ram")) {
    KV_ASSIGN_OR_RETURN(e.spill_ram_bytes,
                        ParseBytes("spill-ram", f.GetString("spill-ram", "")));
  }
  if (f.Has("cache-ram")) {
    KV_ASSIGN_OR_RETURN(int64_t mib,
                        f.GetInt("cache-ram", 0, -1, int64_t{1} << 40));
    e.spill_ram_bytes = mib < 0 ? UINT64_MAX : uint64_t(mib) << 20;
  }
  o->spill_ram_given = f.Has("spill-ram") || f.Has("cache-ram");
  KV_RETURN_IF_ERROR(ParseCacheIdleSlots(f, o));
  e.spill_dir = f.GetString("spill-dir", "");
  if (f.Has("spill-disk")) {
    KV_ASSIGN_OR_RETURN(e.spill_disk_bytes, ParseBytes("spill-disk",
                        f.GetString("spill-disk", "")));
  }
  if (e.spill_disk_bytes > 0 && e.spill_dir.empty()) {
    return InvalidArgumentError("--spill-disk needs --spill-dir DIR");
  }
  if (f.Has("prefix-disk")) {
    KV_ASSIGN_OR_RETURN(e.prefix_disk_bytes, ParseBytes("prefix-disk",
                        f.GetString("prefix-disk", "")));
    if (e.spill_dir.empty()) {
      return InvalidArgumentError("--prefix-disk needs --spill-dir DIR");
    }
    e.prefix_dir = JoinPath(e.spill_dir, kPrefixStoreDirName);
  }
  e.kv_store_url = f.GetString("kv-store", "");
  return ParseStoreAuth(f, &e);
}

Status ParseEngine(const Flags& f, ServeOptions* o) {
  KV_RETURN_IF_ERROR(ParseShape(f, o));
  KV_RETURN_IF_ERROR(ParseTiers(f, o));
  EngineOptions& e = o->engine;
  KV_ASSIGN_OR_RETURN(e.page_size, f.GetUint("page-size", 16, 1, 4096));
  KV_ASSIGN_OR_RETURN(e.cache_type, ParseCacheType(f));
  KV_ASSIGN_OR_RETURN(e.prefill_step_share,
                      f.GetDouble("prefill-share", e.prefill_step_share));
  if (!(e.prefill_step_share >= 0 && e.prefill_step_share <= 64)) {
    return InvalidArgumentError("--prefill-share " +
                                std::to_string(e.prefill_step_share) +
                                " is outside [0, 64]");
  }
  StatusOr<KvPolicy> policy = ParseKvPolicy(f.GetString("kv-policy", "paged"));
  if (!policy.ok()) return policy.status().WithContext("--kv-policy");
  e.kv_policy = *policy;
  KV_ASSIGN_OR_RETURN(e.prefix_cache, f.GetBool("prefix-cache", true));
  KV_ASSIGN_OR_RETURN(bool no_fsync, f.GetBool("no-fsync", false));
  e.sync_saves = !no_fsync;
  KV_ASSIGN_OR_RETURN(e.on_kv_full,
                      ParseOnKvFull(f.GetString("on-kv-full", "refuse")));
  KV_ASSIGN_OR_RETURN(uint64_t io_timeout,
                      f.GetUint("slot-io-timeout", 30, 1, 3600));
  e.slot_io_timeout_ms = static_cast<uint32_t>(io_timeout * 1000);
  return Status::Ok();
}

// --temp, --top-k, ..., -n, --ignore-eos, --cache-prompt: what requests
// that omit a field get.
Status ParseDefaults(const Flags& f, CompletionParams* d) {
  SamplingParams& s = d->sampling;
  KV_ASSIGN_OR_RETURN(double temp, f.GetDouble("temp", s.temperature));
  KV_ASSIGN_OR_RETURN(int64_t top_k,
                      f.GetInt("top-k", s.top_k, -kInt32Max, kInt32Max));
  KV_ASSIGN_OR_RETURN(double top_p, f.GetDouble("top-p", s.top_p));
  KV_ASSIGN_OR_RETURN(double min_p, f.GetDouble("min-p", s.min_p));
  KV_ASSIGN_OR_RETURN(double penalty,
                      f.GetDouble("repeat-penalty", s.repeat_penalty));
  KV_ASSIGN_OR_RETURN(int64_t last_n, f.GetInt("repeat-last-n",
                                               s.repeat_last_n, -1, kInt32Max));
  KV_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", -1, -1, UINT32_MAX));
  s.temperature = static_cast<float>(temp);
  s.top_k = static_cast<int32_t>(top_k);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.repeat_penalty = static_cast<float>(penalty);
  s.repeat_last_n = static_cast<int32_t>(last_n);
  s.seed = seed < 0 ? kRandomSeed : static_cast<uint64_t>(seed);
  Status valid = s.Validate();
  if (!valid.ok()) {
    return InvalidArgumentError("sampling flags: " + std::string(valid.message()));
  }
  KV_ASSIGN_OR_RETURN(int64_t n_predict, f.GetInt("predict", -1, -1, kInt32Max));
  d->n_predict = static_cast<int32_t>(n_predict);
  KV_ASSIGN_OR_RETURN(d->ignore_eos, f.GetBool("ignore-eos", false));
  KV_ASSIGN_OR_RETURN(d->cache_prompt, f.GetBool("cache-prompt", true));
  KV_ASSIGN_OR_RETURN(int64_t keep, f.GetInt("keep", 0, -1, kInt32Max));
  d->n_keep = static_cast<int32_t>(keep);
  return Status::Ok();
}

// --jinja, --chat-template NAME|SOURCE, --chat-template-file,
// --chat-template-kwargs. A given template must parse (its error names the
// line and column) so a typo stops the start, not the first request.
Status ParseChatTemplateFlags(const Flags& f, ServerOptions* s) {
  KV_ASSIGN_OR_RETURN(s->jinja, f.GetBool("jinja", true));
  const std::string given = f.GetString("chat-template", "");
  if (!given.empty() && ParseChatTemplateName(given).ok()) {
    s->chat_template = given;
  } else if (!given.empty()) {
    if (!s->jinja) {
      return ParseChatTemplateName(given).status().WithContext(
          "flag --chat-template (with --no-jinja only built-in names)");
    }
    s->chat_template_source = given;
  }
  // Errors name the flag the template came from (and the file).
  std::string origin = "flag --chat-template";
  if (f.Has("chat-template-file")) {
    const std::string path = f.GetString("chat-template-file", "");
    origin = "flag --chat-template-file '" + path + "'";
    StatusOr<std::string> read = ReadFileToString(Env::Default(), path);
    if (!read.ok()) return read.status().WithContext(origin);
    s->chat_template_source = std::move(*read);
  }
  if (!s->chat_template_source.empty()) {
    KV_RETURN_IF_ERROR(
        ChatFormat::FromJinja(s->chat_template_source).status().WithContext(
            origin));
  }
  const std::string kwargs = f.GetString("chat-template-kwargs", "");
  if (!kwargs.empty()) {
    auto parsed = nlohmann::json::parse(kwargs, nullptr, false);
    if (!parsed.is_object()) {
      return InvalidArgumentError(
          "flag --chat-template-kwargs: expected a JSON object, got '" +
          kwargs + "'");
    }
    if (!s->jinja || !s->chat_template.empty()) {
      return InvalidArgumentError(
          "flag --chat-template-kwargs: only Jinja chat templates take "
          "variables; it cannot go with --no-jinja or a built-in "
          "--chat-template name");
    }
    s->chat_template_kwargs = std::move(parsed);
  }
  return Status::Ok();
}

// --reasoning-format, --reasoning on|off|auto, --reasoning-effort,
// --skip-chat-parsing: how chat replies are read back (server/chat_tools.h).
Status ParseChatOutputFlags(const Flags& f, ServerOptions* s) {
  ChatOutputOptions& c = s->chat_output;
  if (f.Has("reasoning-format")) {
    StatusOr<chat::ReasoningFormat> rf =
        chat::ParseReasoningFormat(f.GetString("reasoning-format", ""));
    if (!rf.ok()) return rf.status().WithContext("flag --reasoning-format");
    c.reasoning_format = *rf;
  }
  const std::string reasoning = f.GetString("reasoning", "auto");
  if (reasoning == "on" || reasoning == "off") {
    c.enable_thinking = reasoning == "on";
  } else if (reasoning != "auto") {
    return InvalidArgumentError("flag --reasoning: expected on, off or auto, "
                                "got '" + reasoning + "'");
  }
  c.reasoning_effort = f.GetString("reasoning-effort", "");
  KV_ASSIGN_OR_RETURN(c.skip_parsing, f.GetBool("skip-chat-parsing", false));
  KV_ASSIGN_OR_RETURN(c.prefill_assistant,
                      f.GetBool("prefill-assistant", true));
  const char* hooks = std::getenv("KVAULT_TEST_HOOKS");
  s->test_hooks = hooks != nullptr && std::string(hooks) == "1";
  return Status::Ok();
}

// --api-key (comma-separated) and --api-key-file (one key per line).
Status ParseApiKeys(const Flags& f, ServerOptions* s) {
  s->api_keys = SplitList(f.GetString("api-key", ""));
  if (!f.Has("api-key-file")) return Status::Ok();
  const std::string path = f.GetString("api-key-file", "");
  KV_ASSIGN_OR_RETURN(std::string text,
                      ReadFileToString(Env::Default(), path));
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    std::string key = text.substr(i, j - i);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) {
      key.pop_back();
    }
    if (!key.empty()) s->api_keys.push_back(key);
    i = j + 1;
  }
  return Status::Ok();
}

// --cors-origins, --cors-methods, --cors-headers, --cors-credentials.
Status ParseCors(const Flags& f, CorsOptions* c) {
  if (f.Has("cors-origins")) {
    KV_ASSIGN_OR_RETURN(c->origins,
                        ParseCorsOrigins(f.GetString("cors-origins", "")));
  }
  c->methods = f.GetString("cors-methods", c->methods);
  c->headers = f.GetString("cors-headers", c->headers);
  KV_ASSIGN_OR_RETURN(c->credentials,
                      f.GetBool("cors-credentials", c->credentials));
  return Status::Ok();
}

// What /props and the UI say about the model: its path, or without -m the
// embedded model's name (or the demo's) and a label saying what it is.
void DescribeModel(const ServeOptions& o, ServerOptions* s) {
  s->model_path = o.model_path;
  s->demo_model = o.model_path.empty() && o.demo_random;
  if (!o.model_path.empty()) return;
  s->model_path = o.demo_random ? "demo" : kEmbeddedModelFile;
  s->model_label = o.demo_random
                       ? "DEMO model (random weights; gibberish output)"
                       : kEmbeddedModelLabel;
}

Status ParseServer(const Flags& f, ServeOptions* o) {
  ServerOptions& s = o->server;
  KV_ASSIGN_OR_RETURN(uint64_t port, f.GetUint("port", 8080, 0, 65535));
  s.host = f.GetString("host", "127.0.0.1");
  s.port = static_cast<uint16_t>(port);
  KV_RETURN_IF_ERROR(ParseApiKeys(f, &s));
  KV_RETURN_IF_ERROR(ParseCors(f, &s.cors));
  KV_ASSIGN_OR_RETURN(int64_t sleep_s,
                      f.GetInt("sleep-idle-seconds", -1, -1, 1 << 30));
  if (sleep_s == 0) {
    return InvalidArgumentError(
        "--sleep-idle-seconds 0: give a positive number of seconds, or -1 "
        "never to sleep");
  }
  s.sleep_idle_seconds = sleep_s < 0 ? 0 : static_cast<uint32_t>(sleep_s);
  KV_ASSIGN_OR_RETURN(int64_t http_threads,
                      f.GetInt("threads-http", -1, -1, 4096));
  if (http_threads > 0) s.max_connections = uint32_t(http_threads);
  KV_ASSIGN_OR_RETURN(uint64_t timeout_s, f.GetUint("timeout", 60, 1, 86400));
  s.body_timeout_ms = static_cast<uint32_t>(timeout_s * 1000);
  s.write_timeout_ms = s.body_timeout_ms;
  s.slot_save_path = f.GetString("slot-save-path", "");
  KV_ASSIGN_OR_RETURN(s.metrics_endpoint, f.GetBool("metrics", false));
  KV_ASSIGN_OR_RETURN(s.props_endpoint, f.GetBool("props", false));
  KV_ASSIGN_OR_RETURN(s.slots_endpoint, f.GetBool("slots", true));
  // Sorted and unique as llama-server keeps them: the first is the id.
  s.aliases = SplitList(f.GetString("alias", ""));
  std::sort(s.aliases.begin(), s.aliases.end());
  s.aliases.erase(std::unique(s.aliases.begin(), s.aliases.end()),
                  s.aliases.end());
  s.tags = SplitList(f.GetString("tags", ""));
  KV_RETURN_IF_ERROR(ParseChatTemplateFlags(f, &s));
  KV_RETURN_IF_ERROR(ParseChatOutputFlags(f, &s));
  KV_ASSIGN_OR_RETURN(s.webui, f.GetBool("ui", true));
  DescribeModel(*o, &s);
  return ParseDefaults(f, &s.defaults);
}

StatusOr<LogLevel> ParseLogLevel(const Flags& f) {
  KV_ASSIGN_OR_RETURN(bool verbose, f.GetBool("verbose", false));
  KV_ASSIGN_OR_RETURN(bool quiet, f.GetBool("log-disable", false));
  // llama.cpp's thresholds: 1 errors, 2 warnings, 3 info (default), 4 debug.
  KV_ASSIGN_OR_RETURN(int64_t level, f.GetInt("verbosity", 3, 0, 1 << 20));
  if (verbose || level >= 4) return LogLevel::kDebug;
  if (quiet || level <= 1) return LogLevel::kError;
  return level == 2 ? LogLevel::kWarning : LogLevel::kInfo;
}

}  // namespace

StatusOr<ServeOptions> ParseServeOptions(const std::vector<std::string>& args,
                                         const EnvLookup& getenv) {
  KV_ASSIGN_OR_RETURN(ParsedArgs parsed,
                      ParseArgs(ServerArgTable(), args, getenv));
  const Flags& f = parsed.flags;
  ServeOptions o;
  o.warnings = std::move(parsed.warnings);
  KV_ASSIGN_OR_RETURN(o.help, f.GetBool("help", false));
  KV_ASSIGN_OR_RETURN(o.version, f.GetBool("version", false));
  o.model_path = f.GetString("model", "");
  KV_ASSIGN_OR_RETURN(o.demo_random, f.GetBool("demo-random", false));
  if (o.demo_random && !o.model_path.empty()) {
    return InvalidArgumentError(
        "--demo-random replaces the embedded model; it cannot go with -m");
  }
  KV_ASSIGN_OR_RETURN(bool mmap, f.GetBool("mmap", false));
  o.load_mode = mmap ? LoadMode::kMmap : LoadMode::kRead;
  KV_ASSIGN_OR_RETURN(o.log_level, ParseLogLevel(f));
  o.server.verbose = o.log_level == LogLevel::kDebug;
  KV_ASSIGN_OR_RETURN(o.server.spm_infill, f.GetBool("spm-infill", false));
  KV_RETURN_IF_ERROR(ParseEngine(f, &o));
  KV_RETURN_IF_ERROR(ParseServer(f, &o));
  return o;
}

void ResolveContext(uint32_t n_ctx_train, ServeOptions* o) {
  EngineOptions& e = o->engine;
  e.n_ctx_total = o->n_ctx > 0 ? static_cast<uint32_t>(o->n_ctx) : n_ctx_train;
  if (e.ctx_per_slot == 0) {
    e.ctx_per_slot = o->kv_unified ? e.n_ctx_total
                                   : std::max(1u, e.n_ctx_total / e.n_slots);
  }
}

std::string ServeHelp() {
  return "usage: kvault serve [flags]   (also installed as llama-server)\n"
         "llama-server's command line (llama.cpp b10573); every flag can "
         "also be set\nby the environment variable shown. Without -m the "
         "embedded stories260K\n(a TinyStories model) is served; "
         "--demo-random serves random weights.\n" +
         ArgsHelp(ServerArgTable());
}

}  // namespace kvault::apps
