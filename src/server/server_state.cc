#include "server/server_state.h"

namespace kvault {

void ReplyJson(HttpResponse& res, const nlohmann::json& j, int status) {
  res.status = status;
  res.SetContent(DumpJson(j), "application/json; charset=utf-8");
}

void ReplyError(HttpResponse& res, const HttpError& error) {
  ReplyJson(res, ErrorJson(error), error.http_status);
}

void ReplyStatus(HttpResponse& res, const Status& status) {
  ReplyError(res, HttpErrorFromStatus(status));
}

void RegisterPost(HttpRouter& server, const std::string& pattern,
                  const ServerState& state, RouteHandler handler) {
  server.Post(pattern, std::move(handler));
}

CompletionLimits LimitsFor(const ServerState& state, const Engine& engine) {
  CompletionLimits limits;
  limits.max_n_predict = state.options.max_n_predict;
  limits.n_ctx_slot = engine.options().ctx_per_slot;
  limits.n_slots = engine.options().n_slots;
  limits.defaults = state.options.defaults;
  return limits;
}

}  // namespace kvault
