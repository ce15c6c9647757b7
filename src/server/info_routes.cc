// GET /health, /props, /v1/models, /slots, /metrics.
#include <algorithm>

#include "core/cpu_features.h"
#include "core/version.h"
#include "model/kernels/kernels.h"
#include "server/json_fields.h"
#include "server/metrics_text.h"
#include "server/openai_codec.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using Request = HttpRequest;
using Response = HttpResponse;
using nlohmann::json;

const std::string kBuildInfo = std::string("kvault ") + kKvaultVersion;

void HandleHealth(const ServerState& state, Response& res) {
  if (!state.ready.load()) {
    json j = ErrorJson(
        MakeHttpError(503, kErrUnavailable, "Loading model", kReasonLoading));
    j["progress"] = state.load_progress.load();
    ReplyJson(res, j, 503);
    return;
  }
  ReplyJson(res, json{{"status", "ok"}});
}

// llama-server's next_token entry: the running task's budget; an idle
// slot shows none (the finished task's numbers must not leak into it).
json NextTokenJson(const SlotInfo& s) {
  const int64_t decoded = s.is_processing ? int64_t(s.n_decoded) : 0;
  const int64_t remain = !s.is_processing || s.n_predict < 0
                             ? -1
                             : std::max<int64_t>(0, s.n_predict - decoded);
  return json{{"has_next_token", s.is_processing},
              {"has_new_line", false},
              {"n_remain", remain},
              {"n_decoded", decoded}};
}

json SlotJson(const SlotInfo& s) {
  CompletionParams p;
  p.n_predict = s.n_predict;
  if (s.params.has_value()) p.sampling = *s.params;
  json j{{"id", s.id},
         {"id_task", s.id_task.has_value() ? json(*s.id_task) : json(-1)},
         {"n_ctx", s.n_ctx},
         {"speculative", false},
         {"is_processing", s.is_processing},
         {"state", s.state},
         {"n_cached", s.n_cached},
         {"spilled", s.spilled},
         {"kv_dropped", s.n_kv_dropped > 0},
         {"n_kv_dropped", s.n_kv_dropped},
         {"next_token", json::array({NextTokenJson(s)})}};
  // As llama-server: a slot that never ran a task shows no params.
  if (s.params.has_value()) j["params"] = GenerationSettingsJson(p);
  return j;
}

// llama-server's answer for an endpoint its command line left off.
void ReplyDisabled(Response& res, const std::string& endpoint,
                   const std::string& flag) {
  ReplyError(res, MakeHttpError(501, kErrNotSupported,
                                "This server does not support " + endpoint +
                                    " endpoint. Start it with `" + flag + "`",
                                "endpoint_disabled"));
}

// POST /props: llama-server accepts any object there and changes nothing;
// kvault can change no property while it runs either, so it says so for
// each one named instead of answering success.
void HandlePropsChange(const ServerState& state, const Request& req,
                       Response& res) {
  if (!state.options.props_endpoint) {
    return ReplyError(
        res, MakeHttpError(501, kErrNotSupported,
                           "This server does not support changing global "
                           "properties. Start it with `--props`",
                           "endpoint_disabled"));
  }
  StatusOr<json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyStatus(res, body.status());
  if (!body->empty()) {
    return ReplyStatus(
        res, UnsupportedField(body->begin().key(),
                              "server properties cannot change while kvault "
                              "runs; restart it with the new flags"));
  }
  ReplyJson(res, json{{"success", true}});
}

void HandleSlots(const ServerState& state, const Request& req, Response& res) {
  if (!state.options.slots_endpoint) return ReplyDisabled(res, "slots", "--slots");
  std::vector<SlotInfo> slots = state.engine.load()->Slots();
  json out = json::array();
  bool any_idle = false;
  for (const SlotInfo& s : slots) {
    any_idle |= !s.is_processing;
    out.push_back(SlotJson(s));
  }
  // llama-server's ?fail_on_no_slot=1: 503 when every slot is busy.
  if (req.Param("fail_on_no_slot") == "1" && !any_idle) {
    ReplyError(res, MakeHttpError(503, kErrUnavailable, "no slot available",
                                  kReasonNoSlotAvailable));
    return;
  }
  ReplyJson(res, out);
}

void HandleProps(const ServerState& state, Response& res) {
  const EngineOptions& options = state.engine_options;
  json settings{{"n_ctx", options.ctx_per_slot},
                {"params", GenerationSettingsJson(state.options.defaults)}};
  const bool sleeping = state.host != nullptr && state.host->sleeping();
  ReplyJson(res, json{{"default_generation_settings", std::move(settings)},
                      {"total_slots", options.n_slots},
                      {"n_ctx_total", options.n_ctx_total},
                      {"model_path", state.options.model_path},
                      {"model_id", state.model_id},
                      {"model_alias", state.model_id},
                      {"endpoint_slots", state.options.slots_endpoint},
                      {"endpoint_props", state.options.props_endpoint},
                      {"endpoint_metrics", state.options.metrics_endpoint},
                      {"modalities",
                       {{"vision", false}, {"video", false}, {"audio", false}}},
                      {"chat_template", state.chat_format.Describe()},
                      {"chat_template_caps", state.chat_format.CapsJson()},
                      {"build_info", kBuildInfo},
                      // kvault's: the kernel set that runs and the CPU
                      // features in use (KVAULT_KERNELS may cap them).
                      {"kernels", kernels::IsaName(options.compute.isa)},
                      {"cpu_features", CpuFeaturesString(CpuFeaturesInUse())},
                      {"demo_model", state.options.demo_model},
                      {"model_label", state.options.model_label},
                      {"webui", state.options.webui},
                      // kvault's: whether POST /slots/{id} actions work
                      // (the server has --slot-save-path).
                      {"slot_save_enabled",
                       !state.options.slot_save_path.empty()},
                      {"sleep_idle_seconds", state.options.sleep_idle_seconds},
                      {"is_sleeping", sleeping}});
}

void HandleModels(const ServerState& state, Response& res) {
  ReplyJson(res, OaiModelsJson(state.model_info));
}

// The engine's metrics and slots now, or asleep the ones it showed on
// entering sleep; counters include those of engines unloaded before.
void MetricsSnapshot(ServerState& state, EngineMetrics* m,
                     std::vector<SlotInfo>* slots) {
  EngineHost::Lease lease;  // keeps a sleeping server's engine alive
  const Engine* engine = state.engine.load();
  if (state.host != nullptr) engine = (lease = state.host->Peek()).engine();
  MutexLock lock(&state.metrics_mu);
  if (engine == nullptr) {
    *m = state.asleep_metrics.value_or(EngineMetrics());
    *slots = state.asleep_slots;
    return;
  }
  *m = engine->Metrics();
  *slots = engine->Slots();
  AddCounters(state.counter_base, m);
}

// The grammar compiles that ran on the compile threads, by how they ended.
std::string GrammarCompileSeries(const GrammarCompileStats& g) {
  PrometheusWriter w;
  w.Family("kvault_grammar_compiles_total", "counter",
           "Large request grammars (GBNF or JSON schema) compiled off the "
           "HTTP workers, by result (cancelled: the client left or the "
           "server stopped first).");
  w.Sample(double(g.num_compiled), "result=\"ok\"");
  w.Sample(double(g.num_refused), "result=\"error\"");
  w.Sample(double(g.num_cancelled), "result=\"cancelled\"");
  return w.text();
}

void HandleMetrics(ServerState& state, Response& res) {
  if (!state.options.metrics_endpoint) {
    return ReplyDisabled(res, "metrics", "--metrics");
  }
  EngineMetrics metrics;
  std::vector<SlotInfo> slots;
  MetricsSnapshot(state, &metrics, &slots);
  uint32_t busy = 0;
  for (const SlotInfo& s : slots) busy += s.is_processing ? 1 : 0;
  // Slot actions count as requests: their failures (bad names included,
  // which never reach the engine) are counted by the slot routes.
  metrics.requests_total += state.slot_actions_total.load();
  metrics.requests_failed += state.slot_actions_failed.load();
  res.status = 200;
  res.SetHeader("Process-Start-Time-Unix", std::to_string(state.started));
  EngineMetrics window;
  {
    // As llama-server, each scrape starts a new throughput window.
    MutexLock lock(&state.metrics_mu);
    window = CounterDelta(metrics, state.last_scrape);
    state.last_scrape = metrics;
  }
  std::string text = FormatMetrics(metrics, window,
                                   static_cast<uint32_t>(slots.size()), busy);
  if (state.grammar_compiler != nullptr) {
    text += GrammarCompileSeries(state.grammar_compiler->Stats());
  }
  res.SetContent(std::move(text), "text/plain; version=0.0.4");
}

}  // namespace

bool IsReadOnlyRoute(const HttpRequest& req) {
  if (req.method != "GET") return false;
  for (const char* path : {"/health", "/v1/health", "/props", "/models",
                           "/v1/models", "/metrics"}) {
    if (req.path == path) return true;
  }
  return false;
}

void RegisterInfoRoutes(HttpRouter& server, ServerState& state) {
  auto health = [&state](const Request&, Response& res) {
    HandleHealth(state, res);
  };
  server.Get("/health", health);
  server.Get("/v1/health", health);
  server.Get("/props", [&state](const Request&, Response& res) {
    HandleProps(state, res);
  });
  RegisterPost(server, "/props", state,
               [&state](const Request& req, Response& res) {
                 HandlePropsChange(state, req, res);
               });
  auto models = [&state](const Request&, Response& res) {
    HandleModels(state, res);
  };
  server.Get("/v1/models", models);
  server.Get("/models", models);
  server.Get("/slots", [&state](const Request& req, Response& res) {
    HandleSlots(state, req, res);
  });
  server.Get("/metrics", [&state](const Request&, Response& res) {
    HandleMetrics(state, res);
  });
}

}  // namespace kvault
