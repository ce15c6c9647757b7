// POST /v1/responses and /responses (OpenAI Responses API).
#include <ctime>

#include "server/json_fields.h"
#include "server/responses_codec.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using nlohmann::json;

void HandleResponses(ServerState& state, const HttpRequest& req,
                     HttpResponse& res) {
  Engine* engine = state.engine.load();
  StatusOr<json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyStatus(res, body.status());
  // The client's key order, for tool schemas.
  const nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(req.body, nullptr, false);
  StatusOr<ResponsesRequest> request = ParseResponsesRequest(
      *body, engine->model().tokenizer(), LimitsFor(state, *engine, req),
      state.chat_format, ordered.is_object() ? &ordered : nullptr);
  if (!request.ok()) return ReplyStatus(res, request.status());
  const std::string n = std::to_string(state.next_response_id.fetch_add(1));
  ResponsesContext ctx;
  ctx.id = "resp_" + n;
  ctx.message_id = "msg_" + n;
  ctx.model = state.model_id;
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.prompt_tokens = request->completion.params.prompt.size();
  ctx.timings_per_token = request->timings_per_token;
  ctx.return_progress = request->return_progress;
  ctx.metadata = request->metadata;
  ctx.chat_syntax = request->completion.chat_syntax;
  RunCompletion(
      state, engine, req, request->completion,
      std::make_unique<ResponsesStreamFormatter>(ctx),
      [&ctx](const CompletionResult& r) { return ResponsesJson(r, ctx); }, res);
}

}  // namespace

void RegisterResponsesRoutes(HttpRouter& server, ServerState& state) {
  for (const char* path : {"/v1/responses", "/responses"}) {
    RegisterPost(server, path, state,
                 [&state](const HttpRequest& req, HttpResponse& res) {
                   HandleResponses(state, req, res);
                 });
  }
}

}  // namespace kvault
