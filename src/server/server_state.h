// What the HTTP route handlers share (internal to src/server): the options,
// the engine once it is ready, the stop flag, and the reply helpers. Each
// route group registers itself on the HttpRouter with a Register*
// function defined in its own file.
#ifndef KVAULT_SERVER_SERVER_STATE_H_
#define KVAULT_SERVER_SERVER_STATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "engine/engine.h"
#include "server/chat_format.h"
#include "server/chat_template.h"
#include "server/completion_codec.h"
#include "server/engine_host.h"
#include "server/grammar_compiler.h"
#include "server/http_error.h"
#include "server/http_message.h"
#include "server/http_router.h"
#include "server/http_server.h"
#include "server/openai_codec.h"
#include "server/sse_sink.h"

namespace kvault {

// The last action that moved KV pages in or out of the pool through the API
// (a slot restore or erase, a defrag), for the web UI's KV map to
// highlight; `seq` 0: none yet.
struct KvEvent {
  uint64_t seq = 0;
  std::string action;  // "restore" | "erase" | "save" | "defrag"
  std::optional<uint32_t> slot;
  int64_t unix_ms = 0;
};

struct ServerState {
  ServerOptions options;
  // The engine for requests: null until SetEngine/SetEngineHost, and while
  // the host sleeps. Route handlers other than the read-only ones (see
  // IsReadOnlyRoute) run holding a waking lease, so it is live for them.
  std::atomic<Engine*> engine{nullptr};
  // Set (with `ready`) when the server sleeps (--sleep-idle-seconds).
  EngineHost* host = nullptr;
  // False while the model first loads; the fields below are written
  // before it turns true and never after.
  std::atomic<bool> ready{false};
  EngineOptions engine_options;  // /props, even asleep
  OaiModelInfo model_info;       // /v1/models, even asleep
  ChatFormat chat_format;        // how chat messages become the prompt
  std::string model_id;          // /v1/models id and OpenAI "model"
  int64_t created = 0;           // Unix seconds the engine was set
  // Unix seconds the server started: /metrics' Process-Start-Time-Unix
  // header, so a scraper can tell a restart from a counter reset.
  int64_t started = 0;
  std::atomic<double> load_progress{0.0};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_response_id{1};
  // POST /slots/{id}?action=... requests, and those answered with an error.
  std::atomic<uint64_t> slot_actions_total{0};
  std::atomic<uint64_t> slot_actions_failed{0};
  // /metrics' memory (under metrics_mu): the counters at the last scrape,
  // for the throughput window; the counters of engines unloaded by sleep;
  // while asleep, what the engine showed on entering sleep.
  Mutex metrics_mu;
  EngineMetrics last_scrape GUARDED_BY(metrics_mu);
  EngineMetrics counter_base GUARDED_BY(metrics_mu);
  std::optional<EngineMetrics> asleep_metrics GUARDED_BY(metrics_mu);
  std::vector<SlotInfo> asleep_slots GUARDED_BY(metrics_mu);
  Mutex events_mu;
  KvEvent last_kv_event GUARDED_BY(events_mu);
  // Compiles the requests' large grammars (set before the listener runs).
  std::unique_ptr<GrammarCompiler> grammar_compiler;
};

// Records `action` (on `slot`, if any) as the last KV event.
void RecordKvEvent(ServerState& state, const std::string& action,
                   std::optional<uint32_t> slot);

// Returns true for the endpoints that answer without waking a sleeping
// server (as llama-server: health, props, models, metrics).
bool IsReadOnlyRoute(const HttpRequest& req);

// Sets `res` to `j` as application/json with HTTP status `status`.
void ReplyJson(HttpResponse& res, const nlohmann::json& j, int status = 200);
// Sets `res` to the error body of `error`.
void ReplyError(HttpResponse& res, const HttpError& error);
// Sets `res` to the error body of a non-OK `status`.
void ReplyStatus(HttpResponse& res, const Status& status);

// Registers POST `pattern`. The connection layer has read the body by
// then, with max_body_bytes enforced for Content-Length and chunked bodies
// alike (a larger body is a 413 and the connection is closed).
void RegisterPost(HttpRouter& server, const std::string& pattern,
                  const ServerState& state, RouteHandler handler);

// Returns the limits `req` is checked against on `engine`; its grammar
// compiles on state.grammar_compiler, watching req's connection.
CompletionLimits LimitsFor(const ServerState& state, const Engine& engine,
                           const HttpRequest& req);

// Runs `request` (from `req`, whose connection the wait watches) on
// `engine` and answers it: streamed through `formatter` when
// request.stream, else as reply(result) (both made by the API's codec).
void RunCompletion(
    ServerState& state, Engine* engine, const HttpRequest& req,
    const CompletionRequest& request,
    std::unique_ptr<StreamFormatter> formatter,
    const std::function<nlohmann::json(const CompletionResult&)>& reply,
    HttpResponse& res);

// GET /health, /props, /v1/models, /slots, /metrics.
void RegisterInfoRoutes(HttpRouter& server, ServerState& state);
// llama-server's endpoints kvault does not serve, answered by name:
// embeddings and rerank (501 embeddings_unsupported), GET /lora-adapters
// ([]: no adapters; --lora is refused at start).
void RegisterAbsentRoutes(HttpRouter& server, ServerState& state);
// POST /completion, /completions, /v1/completions, /v1/chat/completions,
// /chat/completions, /tokenize, /detokenize.
void RegisterCompletionRoutes(HttpRouter& server, ServerState& state);
// POST /slots/{id}?action=save|restore|erase.
void RegisterSlotRoutes(HttpRouter& server, ServerState& state);
// GET /kv, POST /kv/defrag.
void RegisterKvRoutes(HttpRouter& server, ServerState& state);
// POST /v1/messages, /v1/messages/count_tokens (Anthropic).
void RegisterAnthropicRoutes(HttpRouter& server, ServerState& state);
// POST /v1/responses, /responses (OpenAI Responses).
void RegisterResponsesRoutes(HttpRouter& server, ServerState& state);
// GET / and the web UI's embedded assets (webui_routes.cc), unless
// --no-webui.
void RegisterWebUiRoutes(HttpRouter& server, ServerState& state);
// Returns true when `path` is one of the web UI's pages or assets and the
// UI is on: served without the API key (the page asks for it) and without
// waking a sleeping server.
bool IsWebUiPath(const ServerOptions& options, std::string_view path);

}  // namespace kvault

#endif  // KVAULT_SERVER_SERVER_STATE_H_
