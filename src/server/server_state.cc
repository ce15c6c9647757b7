#include "server/server_state.h"

#include "server/stream_response.h"

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

CompletionLimits LimitsFor(const ServerState& state, const Engine& engine,
                           const HttpRequest& req) {
  CompletionLimits limits;
  limits.n_ctx_slot = engine.options().ctx_per_slot;
  limits.n_slots = engine.options().n_slots;
  limits.defaults = state.options.defaults;
  limits.tokenizer = &engine.model().tokenizer();
  limits.chat_output = state.options.chat_output;
  limits.test_hooks = state.options.test_hooks;
  if (GrammarCompiler* compiler = state.grammar_compiler.get()) {
    limits.compile_grammar = [compiler, &req](GrammarSource source) {
      return compiler->Compile(req, std::move(source));
    };
  }
  return limits;
}

void RunCompletion(
    ServerState& state, Engine* engine, const HttpRequest& req,
    const CompletionRequest& request,
    std::unique_ptr<StreamFormatter> formatter,
    const std::function<nlohmann::json(const CompletionResult&)>& reply,
    HttpResponse& res) {
  StatusOr<std::shared_ptr<QueueSink>> sink = QueueSink::Create();
  if (!sink.ok()) return ReplyStatus(res, sink.status());
  StatusOr<uint64_t> task = engine->Submit(request.params, *sink);
  if (!task.ok()) return ReplyStatus(res, task.status());
  if (request.stream) {
    auto job = std::make_shared<StreamJob>();
    job->engine = engine;
    job->task_ids = {*task};
    job->sink = *sink;
    job->formatters.push_back(std::move(formatter));
    ServeStream(std::move(job), &res);
    return;
  }
  std::vector<TokenEvent> events;
  StatusOr<CompletionResult> result =
      WaitForResult(engine, *task, sink->get(), req, &events);
  if (!result.ok()) return ReplyStatus(res, result.status());
  ReplyJson(res, reply(*result));
}

}  // namespace kvault
