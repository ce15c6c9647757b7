// POST /completion (llama-server), /v1/completions and /v1/chat/completions
// (OpenAI), /tokenize and /detokenize.
#include <ctime>
#include <optional>

#include "server/infill.h"
#include "server/json_fields.h"
#include "server/openai_codec.h"
#include "server/openai_stream.h"
#include "server/server_state.h"
#include "server/stream_response.h"

namespace kvault {
namespace {

using Request = HttpRequest;
using Response = HttpResponse;
using nlohmann::json;

enum class Api { kLlama, kInfill, kOaiCompletion, kOaiChat };

// True for llama-server's own result format (/completion, /infill).
bool IsLlama(Api api) { return api == Api::kLlama || api == Api::kInfill; }

// llama-server's answer to a prompt that leaves no room in a slot.
HttpError ExceedContextError(size_t n_prompt, uint32_t n_ctx) {
  HttpError e =
      MakeHttpError(400, kErrExceedContext,
                    "request (" + std::to_string(n_prompt) +
                        " tokens) exceeds the available context size (" +
                        std::to_string(n_ctx) + " tokens), try increasing it",
                    "prompt_too_long");
  e.details = {{"n_prompt_tokens", n_prompt}, {"n_ctx", n_ctx}};
  return e;
}

// The error for a request whose prompt leaves no room to generate in a
// slot, as llama-server; nullopt when it fits.
std::optional<HttpError> ContextError(const CompletionRequest& request,
                                      const Engine& engine) {
  const size_t n_prompt = request.params.prompt.size();
  const uint32_t n_ctx = engine.options().ctx_per_slot;
  if (n_prompt < n_ctx) return std::nullopt;
  return ExceedContextError(n_prompt, n_ctx);
}

StatusOr<CompletionRequest> ParseFor(Api api, const ServerState& state,
                                     const HttpRequest& req, const json& body,
                                     const Engine& engine,
                                     const nlohmann::ordered_json* ordered) {
  const Tokenizer& tokenizer = engine.model().tokenizer();
  CompletionLimits limits = LimitsFor(state, engine, req);
  if (ordered != nullptr && ordered->is_object()) limits.ordered_body = ordered;
  switch (api) {
    case Api::kLlama:
      return ParseCompletionRequest(body, tokenizer, limits);
    case Api::kInfill:
      return ParseInfillRequest(
          body, tokenizer, limits,
          InfillShape{engine.options().prefill_chunk,
                      state.options.defaults.n_predict,
                      engine.options().ctx_per_slot, state.options.spm_infill});
    case Api::kOaiCompletion:
      return ParseOaiCompletionRequest(body, tokenizer, limits);
    case Api::kOaiChat:
      return ParseOaiChatRequest(body, tokenizer, limits, state.chat_format,
                                 ordered);
  }
  return InternalError("unknown API");
}

OaiContext MakeOaiContext(Api api, ServerState& state,
                          const CompletionRequest& request,
                          const Engine& engine) {
  OaiContext ctx;
  ctx.n_probs = request.params.n_probs;
  ctx.tokenizer = &engine.model().tokenizer();
  ctx.include_usage = request.include_usage;
  ctx.timings_per_token = request.timings_per_token;
  ctx.id = std::string(api == Api::kOaiChat ? "chatcmpl-" : "cmpl-") +
           std::to_string(state.next_response_id.fetch_add(1));
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.model = state.model_id;
  ctx.chat_syntax = request.chat_syntax;
  // llama-server's deepseek-legacy keeps streamed reasoning inline.
  if (ctx.chat_syntax && request.stream &&
      ctx.chat_syntax->reasoning_format ==
          chat::ReasoningFormat::kDeepSeekLegacy) {
    ctx.chat_syntax->reasoning_in_content = true;
  }
  return ctx;
}

std::unique_ptr<StreamFormatter> MakeFormatter(Api api, ServerState& state,
                                               const CompletionRequest& req,
                                               const Engine& engine) {
  switch (api) {
    case Api::kLlama:
    case Api::kInfill:
      return std::make_unique<CompletionStreamFormatter>(
          req, &engine.model().tokenizer());
    case Api::kOaiCompletion:
      return std::make_unique<OaiCompletionStreamFormatter>(
          MakeOaiContext(api, state, req, engine));
    case Api::kOaiChat:
      return std::make_unique<OaiChatStreamFormatter>(
          MakeOaiContext(api, state, req, engine));
  }
  return nullptr;
}

json ApiResultJson(Api api, ServerState& state, const CompletionRequest& req,
                   const CompletionResult& result,
                   const std::vector<TokenEvent>& events,
                   const Engine& engine) {
  switch (api) {
    case Api::kLlama:
    case Api::kInfill:
      return CompletionResponseJson(req, result, events,
                                    engine.model().tokenizer());
    case Api::kOaiCompletion:
      return OaiCompletionJson(result, MakeOaiContext(api, state, req, engine),
                               events);
    case Api::kOaiChat:
      return OaiChatJson(result, MakeOaiContext(api, state, req, engine),
                         events);
  }
  return json();
}

// The reply, with llama-server's "__verbose" debugging object on the
// OpenAI routes when asked for.
json ResultJson(Api api, ServerState& state, const CompletionRequest& req,
                const CompletionResult& result,
                const std::vector<TokenEvent>& events, const Engine& engine) {
  json out = ApiResultJson(api, state, req, result, events, engine);
  if (!IsLlama(api) && (req.verbose || state.options.verbose)) {
    out["__verbose"] =
        CompletionResponseJson(req, result, events, engine.model().tokenizer());
  }
  return out;
}

// True when `prompt` lists several prompts (llama-server runs one task per
// entry): an array holding an array or an object, or only strings. An
// array of ids, or of ids and strings, is one prompt.
bool IsPromptList(const json& prompt) {
  if (!prompt.is_array() || prompt.empty()) return false;
  bool any_number = false;
  bool any_nested = false;
  for (const json& p : prompt) {
    any_number |= p.is_number();
    any_nested |= p.is_array() || p.is_object();
  }
  return any_nested || (!any_number && prompt.size() > 1);
}

// The bodies of the tasks a request asks for, each with one prompt and
// one choice: one per prompt of a prompt list, times n (OpenAI) or n_cmpl
// (llama-server).
StatusOr<std::vector<json>> SplitTasks(Api api, const json& body) {
  int64_t n = 1;
  KV_RETURN_IF_ERROR(ReadInt(body, IsLlama(api) ? "n_cmpl" : "n", 1, 128, &n));
  std::vector<json> prompts;
  const json* prompt = api == Api::kOaiChat || api == Api::kInfill
                           ? nullptr
                           : FindField(body, "prompt");
  if (prompt != nullptr && IsPromptList(*prompt)) {
    for (const json& p : *prompt) {
      json one = body;
      one["prompt"] = p;
      prompts.push_back(std::move(one));
    }
  } else {
    prompts.push_back(body);
  }
  std::vector<json> tasks;
  for (json& p : prompts) {
    p.erase("n");
    p.erase("n_cmpl");
    for (int64_t i = 0; i < n; ++i) tasks.push_back(p);
  }
  return tasks;
}

// Runs several tasks at once (not streamed) and answers with llama-server's
// list of results, or one OpenAI object whose choices are the tasks'.
void HandleTasks(Api api, ServerState& state, Engine* engine,
                 std::vector<CompletionRequest> requests, const Request& req,
                 Response& res) {
  std::vector<std::shared_ptr<QueueSink>> sinks;
  std::vector<uint64_t> tasks;
  for (const CompletionRequest& r : requests) {
    StatusOr<std::shared_ptr<QueueSink>> sink = QueueSink::Create();
    StatusOr<uint64_t> task =
        sink.ok() ? engine->Submit(r.params, *sink) : sink.status();
    if (sink.ok()) sinks.push_back(*sink);
    if (!task.ok()) {
      for (uint64_t t : tasks) engine->Cancel(t);
      return ReplyStatus(res, task.status());
    }
    tasks.push_back(*task);
  }
  json out = json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::vector<TokenEvent> events;
    StatusOr<CompletionResult> result =
        WaitForResult(engine, tasks[i], sinks[i].get(), req, &events);
    if (!result.ok()) {
      for (size_t j = i + 1; j < tasks.size(); ++j) engine->Cancel(tasks[j]);
      return ReplyStatus(res, result.status());
    }
    json one = ResultJson(api, state, requests[i], *result, events, *engine);
    if (IsLlama(api)) {
      one["index"] = i;
      out.push_back(std::move(one));
    } else if (out.empty()) {
      out = std::move(one);
    } else {
      json choice = one["choices"][0];
      choice["index"] = i;
      out["choices"].push_back(std::move(choice));
      for (const char* k :
           {"prompt_tokens", "completion_tokens", "total_tokens"}) {
        out["usage"][k] =
            out["usage"][k].get<uint64_t>() + one["usage"][k].get<uint64_t>();
      }
    }
  }
  ReplyJson(res, out);
}

// Streams one task, or several at once as one SSE stream (each task's
// events tagged with its index, as llama-server streams them).
void HandleStreamedTasks(Api api, ServerState& state, Engine* engine,
                         const std::vector<CompletionRequest>& requests,
                         Response& res) {
  StatusOr<std::shared_ptr<QueueSink>> sink =
      QueueSink::Create(static_cast<uint32_t>(requests.size()));
  if (!sink.ok()) return ReplyStatus(res, sink.status());
  auto job = std::make_shared<StreamJob>();
  job->engine = engine;
  job->sink = *sink;
  if (requests.size() > 1) {
    job->merger = std::make_unique<ChoiceStreamMerger>(!IsLlama(api));
  }
  for (uint32_t i = 0; i < requests.size(); ++i) {
    StatusOr<uint64_t> task =
        engine->Submit(requests[i].params, (*sink)->ForTask(i));
    if (!task.ok()) {
      for (uint64_t t : job->task_ids) engine->Cancel(t);
      return ReplyStatus(res, task.status());
    }
    job->task_ids.push_back(*task);
    job->formatters.push_back(MakeFormatter(api, state, requests[i], *engine));
  }
  ServeStream(std::move(job), &res);
}

void HandleCompletion(Api api, ServerState& state, const Request& req,
                      Response& res) {
  Engine* engine = state.engine.load();
  StatusOr<json> parsed = ParseJsonObject(req.body);
  if (!parsed.ok()) return ReplyStatus(res, parsed.status());
  // Chat templates and JSON schemas see the keys in the client's order.
  const nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(req.body, nullptr, false);
  StatusOr<std::vector<json>> bodies = SplitTasks(api, *parsed);
  if (!bodies.ok()) return ReplyStatus(res, bodies.status());
  if (bodies->size() > 1) {
    std::vector<CompletionRequest> requests;
    for (const json& b : *bodies) {
      StatusOr<CompletionRequest> r =
          ParseFor(api, state, req, b, *engine, &ordered);
      if (!r.ok()) return ReplyStatus(res, r.status());
      if (auto e = ContextError(*r, *engine)) return ReplyError(res, *e);
      requests.push_back(std::move(*r));
    }
    if (requests.front().stream) {
      return HandleStreamedTasks(api, state, engine, requests, res);
    }
    return HandleTasks(api, state, engine, std::move(requests), req, res);
  }
  const json* body = &bodies->front();
  StatusOr<CompletionRequest> request =
      ParseFor(api, state, req, *body, *engine, &ordered);
  if (!request.ok()) return ReplyStatus(res, request.status());
  if (auto e = ContextError(*request, *engine)) return ReplyError(res, *e);
  if (request->stream) {
    return HandleStreamedTasks(api, state, engine, {std::move(*request)},
                               res);
  }
  StatusOr<std::shared_ptr<QueueSink>> sink = QueueSink::Create();
  if (!sink.ok()) return ReplyStatus(res, sink.status());
  StatusOr<uint64_t> task = engine->Submit(request->params, *sink);
  if (!task.ok()) return ReplyStatus(res, task.status());
  std::vector<TokenEvent> events;
  StatusOr<CompletionResult> result =
      WaitForResult(engine, *task, sink->get(), req, &events);
  if (!result.ok()) return ReplyStatus(res, result.status());
  ReplyJson(res, ResultJson(api, state, *request, *result, events, *engine));
}

// {"input_tokens": N}: the tokens a chat request's prompt would take.
// The same prompt the chat route would run (tools and prefill included).
StatusOr<json> ChatInputTokens(const json& body,
                               const nlohmann::ordered_json* ordered,
                               const Tokenizer& tokenizer,
                               const ServerState& state) {
  KV_ASSIGN_OR_RETURN(
      ChatPrompt prompt,
      BuildChatPrompt(body, ordered, tokenizer, state.chat_format,
                      state.options.chat_output));
  return json{{"input_tokens", prompt.tokens.size()}};
}

// Runs a JSON-in, JSON-out handler over the model's tokenizer; `fn` gets
// the body, the same body with its keys in the client's order, and the
// tokenizer.
template <typename Fn>
void HandleTokenizerCall(ServerState& state, const Request& req, Response& res,
                         Fn fn) {
  StatusOr<json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyStatus(res, body.status());
  const nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(req.body, nullptr, false);
  StatusOr<json> out =
      fn(*body, &ordered, state.engine.load()->model().tokenizer());
  if (!out.ok()) return ReplyStatus(res, out.status());
  ReplyJson(res, *out);
}

// Adapts a (body, tokenizer) handler to HandleTokenizerCall.
template <typename Fn>
auto IgnoringOrder(Fn fn) {
  return [fn](const json& body, const nlohmann::ordered_json*,
              const Tokenizer& tokenizer) { return fn(body, tokenizer); };
}

}  // namespace

void RegisterCompletionRoutes(HttpRouter& server, ServerState& state) {
  auto route = [&state](Api api) {
    return [&state, api](const Request& req, Response& res) {
      HandleCompletion(api, state, req, res);
    };
  };
  const std::pair<const char*, Api> completions[] = {
      {"/completion", Api::kLlama},
      {"/completions", Api::kLlama},
      {"/infill", Api::kInfill},
      {"/v1/completions", Api::kOaiCompletion},
      {"/v1/chat/completions", Api::kOaiChat},
      {"/chat/completions", Api::kOaiChat}};
  for (const auto& [path, api] : completions) {
    RegisterPost(server, path, state, route(api));
  }
  // llama-server's token count of a chat request, before running it.
  for (const char* path : {"/chat/completions/input_tokens",
                           "/v1/chat/completions/input_tokens"}) {
    RegisterPost(
        server, path, state, [&state](const Request& req, Response& res) {
          HandleTokenizerCall(
              state, req, res,
              [&state](const json& body, const nlohmann::ordered_json* ordered,
                       const Tokenizer& tokenizer) {
                return ChatInputTokens(body, ordered, tokenizer, state);
              });
        });
  }
  RegisterPost(
      server, "/apply-template", state,
      [&state](const Request& req, Response& res) {
        HandleTokenizerCall(
            state, req, res,
            [&state](const json& body, const nlohmann::ordered_json* ordered,
                     const Tokenizer& tokenizer) {
              return ApplyTemplate(body, ordered, tokenizer, state.chat_format);
            });
      });
  RegisterPost(
      server, "/tokenize", state, [&state](const Request& req, Response& res) {
        StatusOr<json> body = ParseJsonObject(req.body);
        if (!body.ok()) return ReplyStatus(res, body.status());
        StatusOr<std::string> out =
            HandleTokenize(*body, state.engine.load()->model().tokenizer());
        if (!out.ok()) return ReplyStatus(res, out.status());
        res.status = 200;
        res.SetContent(std::move(*out), "application/json; charset=utf-8");
      });
  RegisterPost(server, "/detokenize", state,
               [&state](const Request& req, Response& res) {
                 HandleTokenizerCall(state, req, res,
                                     IgnoringOrder(HandleDetokenize));
               });
}

}  // namespace kvault
