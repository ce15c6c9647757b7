// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API).
#include "server/anthropic_codec.h"
#include "server/json_fields.h"
#include "server/server_state.h"

namespace kvault {
namespace {

using nlohmann::json;

void HandleMessages(ServerState& state, const HttpRequest& req,
                    HttpResponse& res) {
  Engine* engine = state.engine.load();
  StatusOr<json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyStatus(res, body.status());
  StatusOr<AnthropicRequest> request =
      ParseAnthropicRequest(*body, engine->model().tokenizer(),
                            LimitsFor(state, *engine, req), state.chat_format);
  if (!request.ok()) return ReplyStatus(res, request.status());
  AnthropicContext ctx;
  ctx.id = "msg_" + std::to_string(state.next_response_id.fetch_add(1));
  ctx.model = state.model_id;
  ctx.stop_sequences = request->stop_sequences;
  ctx.tool_names = request->tool_names;
  ctx.prompt_tokens = request->completion.params.prompt.size();
  RunCompletion(
      state, engine, req, request->completion,
      std::make_unique<AnthropicStreamFormatter>(ctx),
      [&ctx](const CompletionResult& r) {
        return AnthropicMessageJson(r, ctx);
      },
      res);
}

void HandleCountTokens(ServerState& state, const HttpRequest& req,
                       HttpResponse& res) {
  StatusOr<json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyStatus(res, body.status());
  StatusOr<json> out = AnthropicCountTokens(
      *body, state.engine.load()->model().tokenizer(), state.chat_format);
  if (!out.ok()) return ReplyStatus(res, out.status());
  ReplyJson(res, *out);
}

}  // namespace

void RegisterAnthropicRoutes(HttpRouter& server, ServerState& state) {
  RegisterPost(server, "/v1/messages", state,
               [&state](const HttpRequest& req, HttpResponse& res) {
                 HandleMessages(state, req, res);
               });
  RegisterPost(server, "/v1/messages/count_tokens", state,
               [&state](const HttpRequest& req, HttpResponse& res) {
                 HandleCountTokens(state, req, res);
               });
}

}  // namespace kvault
