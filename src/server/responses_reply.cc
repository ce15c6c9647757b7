// /v1/responses replies: the "response" object and its SSE event stream.
#include <algorithm>
#include <ctime>

#include "server/openai_codec.h"
#include "server/responses_codec.h"

namespace kvault {
namespace {

using nlohmann::json;

json OutputText(const std::string& text) {
  return json{{"type", "output_text"},
              {"text", text},
              {"annotations", json::array()},
              {"logprobs", json::array()}};
}

json MessageItem(const ResponsesContext& ctx, const std::string& text,
                 bool done) {
  json content = json::array();
  if (done) content.push_back(OutputText(text));
  return json{{"id", ctx.message_id},
              {"type", "message"},
              {"status", done ? "completed" : "in_progress"},
              {"role", "assistant"},
              {"content", std::move(content)}};
}

// The response object without its final fields (output, usage).
json ResponseShell(const ResponsesContext& ctx, const char* status) {
  return json{{"id", ctx.id},           {"object", "response"},
              {"created_at", ctx.created}, {"status", status},
              {"model", ctx.model},     {"output", json::array()},
              {"metadata", ctx.metadata.is_null() ? json::object()
                                                  : ctx.metadata}};
}

json FunctionCallItem(const ResponsesContext& ctx, const chat::ToolCall& call,
                      size_t i, bool done) {
  return json{{"id", "fc_" + ctx.id.substr(5) + "_" + std::to_string(i)},
              {"type", "function_call"},
              {"status", done ? "completed" : "in_progress"},
              {"call_id", call.id},
              {"name", call.name},
              {"arguments", done ? call.arguments : ""}};
}

json ReasoningItem(const ResponsesContext& ctx, const std::string& text) {
  return json{{"id", "rs_" + ctx.id.substr(5)},
              {"type", "reasoning"},
              {"summary", json::array()},
              {"content", {{{"type", "reasoning_text"}, {"text", text}}}}};
}

// The output items of a parsed reply: reasoning, the message (when it has
// text or nothing else), then one function_call per call. A stream has
// announced the message first (output_index 0) and the calls after it, so
// its items keep that order, the reasoning last.
json ParsedOutput(const ResponsesContext& ctx, const chat::ChatMessage& m,
                  bool streamed) {
  json out = json::array();
  const bool reasoning = !m.reasoning_content.empty();
  if (reasoning && !streamed) out.push_back(ReasoningItem(ctx, m.reasoning_content));
  if (streamed || !m.content.empty() || m.tool_calls.empty()) {
    out.push_back(MessageItem(ctx, m.content, true));
  }
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    out.push_back(FunctionCallItem(ctx, m.tool_calls[i], i, true));
  }
  if (reasoning && streamed) out.push_back(ReasoningItem(ctx, m.reasoning_content));
  return out;
}

}  // namespace

json ResponsesUsageJson(const CompletionResult& result) {
  const uint64_t cached =
      std::min(result.timings.cache_n, result.tokens_evaluated);
  return json{{"input_tokens", result.tokens_evaluated},
              {"output_tokens", result.tokens_predicted},
              {"total_tokens", result.tokens_evaluated + result.tokens_predicted},
              {"input_tokens_details", {{"cached_tokens", cached}}}};
}

json ResponsesJson(const CompletionResult& result,
                   const ResponsesContext& ctx,
                   const chat::ChatMessage* parsed) {
  // OpenAI: a response cut at max_output_tokens is "incomplete" (its
  // incomplete_details say why) and has no completed_at. (llama-server
  // says "completed" next to incomplete_details.)
  const bool cut = FinishReason(result) == "length";
  json out = ResponseShell(ctx, cut ? "incomplete" : "completed");
  if (!cut) out["completed_at"] = static_cast<int64_t>(std::time(nullptr));
  if (parsed != nullptr) {
    out["output"] = ParsedOutput(ctx, *parsed, /*streamed=*/true);
  } else if (ctx.chat_syntax) {
    ChatReplyReader reader(*ctx.chat_syntax);
    reader.Message(result.content);
    out["output"] = ParsedOutput(ctx, reader.message(), /*streamed=*/false);
  } else {
    out["output"].push_back(MessageItem(ctx, result.content, true));
  }
  out["incomplete_details"] =
      cut ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  out["usage"] = ResponsesUsageJson(result);
  return out;
}

// --- stream -------------------------------------------------------------

ResponsesStreamFormatter::ResponsesStreamFormatter(ResponsesContext ctx)
    : ctx_(std::move(ctx)) {
  if (ctx_.chat_syntax) reader_.emplace(*ctx_.chat_syntax);
}

std::string ResponsesStreamFormatter::Event(json j) {
  j["sequence_number"] = sequence_++;
  return "event: " + j["type"].get<std::string>() + "\n" + SseData(j);
}

json ResponsesStreamFormatter::LiveTimings() const {
  using Ms = std::chrono::duration<double, std::milli>;
  CompletionTimings t;
  t.prompt_n = ctx_.prompt_tokens;
  t.prompt_ms = Ms(first_token_ - submitted_).count();
  t.predicted_n = tokens_;
  t.predicted_ms = Ms(Clock::now() - first_token_).count();
  return TimingsJson(t);
}

std::string ResponsesStreamFormatter::OpenOnce() {
  if (opened_) return "";
  opened_ = true;
  // Two statements: the events are numbered in the order they are made.
  std::string out = Event({{"type", "response.created"},
                           {"response", ResponseShell(ctx_, "in_progress")}});
  return out + Event({{"type", "response.in_progress"},
                      {"response", ResponseShell(ctx_, "in_progress")}});
}

std::string ResponsesStreamFormatter::FirstTokenOnce() {
  std::string out = OpenOnce();
  if (message_added_) return out;
  message_added_ = true;
  first_token_ = Clock::now();
  out += Event({{"type", "response.output_item.added"},
                {"output_index", 0},
                {"item", MessageItem(ctx_, "", false)}});
  return out + Event({{"type", "response.content_part.added"},
                      {"item_id", ctx_.message_id},
                      {"output_index", 0},
                      {"content_index", 0},
                      {"part", OutputText("")}});
}

std::string ResponsesStreamFormatter::Start(int /*slot*/) {
  return OpenOnce();
}

std::string ResponsesStreamFormatter::Progress(const PromptProgress& progress,
                                               int /*slot*/) {
  std::string out = OpenOnce();
  if (!ctx_.return_progress) return out;
  json event{{"type", "response.in_progress"},
             {"response", ResponseShell(ctx_, "in_progress")},
             {"prompt_progress", PromptProgressJson(progress)}};
  if (ctx_.timings_per_token) event["timings"] = TimingsJson(progress.timings);
  return out + Event(std::move(event));
}

std::string ResponsesStreamFormatter::Delta(const std::string& text) {
  streamed_ += text;
  json delta{{"type", "response.output_text.delta"},
             {"item_id", ctx_.message_id},
             {"output_index", 0},
             {"content_index", 0},
             {"delta", text}};
  if (ctx_.timings_per_token) delta["timings"] = LiveTimings();
  return Event(std::move(delta));
}

std::string ResponsesStreamFormatter::Token(const TokenEvent& event,
                                            int /*slot*/) {
  std::string out = FirstTokenOnce();
  ++tokens_;
  if (event.text.empty()) return out;
  if (!reader_) return out + Delta(event.text);
  // Only the message's text streams as it comes; reasoning and calls
  // arrive as whole items at the end.
  for (const json& d : reader_->Feed(event.text)) {
    if (d.contains("content")) out += Delta(d["content"].get<std::string>());
  }
  return out;
}

std::string ResponsesStreamFormatter::Done(const CompletionResult& result) {
  std::string out = FirstTokenOnce();
  if (reader_) return out + DoneParsed(result);
  if (result.content.size() > streamed_.size() &&
      result.content.compare(0, streamed_.size(), streamed_) == 0) {
    out += Delta(result.content.substr(streamed_.size()));
  }
  out += MessageDone(result.content);
  json completed{{"type", "response.completed"},
                 {"response", ResponsesJson(result, ctx_)}};
  completed["timings"] = TimingsJson(result.timings);
  return out + Event(std::move(completed));
}

std::string ResponsesStreamFormatter::MessageDone(const std::string& text) {
  std::string out = Event({{"type", "response.output_text.done"},
                           {"item_id", ctx_.message_id},
                           {"output_index", 0},
                           {"content_index", 0},
                           {"text", text}});
  out += Event({{"type", "response.content_part.done"},
                {"item_id", ctx_.message_id},
                {"output_index", 0},
                {"content_index", 0},
                {"part", OutputText(text)}});
  return out + Event({{"type", "response.output_item.done"},
                      {"output_index", 0},
                      {"item", MessageItem(ctx_, text, true)}});
}

std::string ResponsesStreamFormatter::DoneParsed(
    const CompletionResult& result) {
  std::string out;
  // The text the engine had not streamed yet, then the final parse.
  std::string rest;
  size_t fed = reader_->fed_bytes();
  if (result.content.size() > fed) rest = result.content.substr(fed);
  std::vector<json> deltas = reader_->Feed(rest);
  for (json& d : reader_->Finish()) deltas.push_back(std::move(d));
  for (const json& d : deltas) {
    if (d.contains("content")) out += Delta(d["content"].get<std::string>());
  }
  const chat::ChatMessage& m = reader_->message();
  out += MessageDone(m.content);
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    const json item = FunctionCallItem(ctx_, m.tool_calls[i], i, true);
    out += Event({{"type", "response.output_item.added"},
                  {"output_index", index},
                  {"item", FunctionCallItem(ctx_, m.tool_calls[i], i, false)}});
    out += Event({{"type", "response.function_call_arguments.delta"},
                  {"item_id", item["id"]},
                  {"output_index", index},
                  {"delta", m.tool_calls[i].arguments}});
    out += Event({{"type", "response.function_call_arguments.done"},
                  {"item_id", item["id"]},
                  {"output_index", index},
                  {"arguments", m.tool_calls[i].arguments}});
    out += Event({{"type", "response.output_item.done"},
                  {"output_index", index},
                  {"item", item}});
  }
  json completed{{"type", "response.completed"},
                 {"response", ResponsesJson(result, ctx_, &m)}};
  completed["timings"] = TimingsJson(result.timings);
  return out + Event(std::move(completed));
}

}  // namespace kvault
