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
                   const ResponsesContext& ctx) {
  // As llama-server: "completed" even at the token limit, which
  // incomplete_details names.
  json out = ResponseShell(ctx, "completed");
  out["completed_at"] = static_cast<int64_t>(std::time(nullptr));
  out["output"].push_back(MessageItem(ctx, result.content, true));
  out["incomplete_details"] =
      FinishReason(result) == "length"
          ? json{{"reason", "max_output_tokens"}}
          : json(nullptr);
  out["usage"] = ResponsesUsageJson(result);
  return out;
}

// --- stream -------------------------------------------------------------

ResponsesStreamFormatter::ResponsesStreamFormatter(ResponsesContext ctx)
    : ctx_(std::move(ctx)) {}

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

std::string ResponsesStreamFormatter::StartOnce() {
  if (started_) return "";
  started_ = true;
  first_token_ = Clock::now();
  std::string out = Event({{"type", "response.created"},
                           {"response", ResponseShell(ctx_, "in_progress")}});
  json progress{{"type", "response.in_progress"},
                {"response", ResponseShell(ctx_, "in_progress")}};
  if (ctx_.return_progress) {
    // The engine reports the prompt once it is evaluated, not per batch.
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        first_token_ - submitted_);
    progress["prompt_progress"] = {{"total", ctx_.prompt_tokens},
                                   {"cache", 0},
                                   {"processed", ctx_.prompt_tokens},
                                   {"time_ms", ms.count()}};
  }
  if (ctx_.timings_per_token) progress["timings"] = LiveTimings();
  out += Event(std::move(progress));
  out += Event({{"type", "response.output_item.added"},
                {"output_index", 0},
                {"item", MessageItem(ctx_, "", false)}});
  return out + Event({{"type", "response.content_part.added"},
                      {"item_id", ctx_.message_id},
                      {"output_index", 0},
                      {"content_index", 0},
                      {"part", OutputText("")}});
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
  std::string out = StartOnce();
  ++tokens_;
  if (event.text.empty()) return out;
  return out + Delta(event.text);
}

std::string ResponsesStreamFormatter::Done(const CompletionResult& result) {
  std::string out = StartOnce();
  if (result.content.size() > streamed_.size() &&
      result.content.compare(0, streamed_.size(), streamed_) == 0) {
    out += Delta(result.content.substr(streamed_.size()));
  }
  const std::string& text = result.content;
  out += Event({{"type", "response.output_text.done"},
                {"item_id", ctx_.message_id},
                {"output_index", 0},
                {"content_index", 0},
                {"text", text}});
  out += Event({{"type", "response.content_part.done"},
                {"item_id", ctx_.message_id},
                {"output_index", 0},
                {"content_index", 0},
                {"part", OutputText(text)}});
  out += Event({{"type", "response.output_item.done"},
                {"output_index", 0},
                {"item", MessageItem(ctx_, text, true)}});
  json completed{{"type", "response.completed"},
                 {"response", ResponsesJson(result, ctx_)}};
  completed["timings"] = TimingsJson(result.timings);
  return out + Event(std::move(completed));
}

}  // namespace kvault
