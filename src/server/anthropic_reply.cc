// /v1/messages replies: the "message" object and its SSE event stream.
#include <algorithm>

#include "server/anthropic_codec.h"
#include "server/http_error.h"

namespace kvault {
namespace {

using nlohmann::json;

// One named SSE event, as Anthropic sends them: "event: T\ndata: {...}\n\n".
std::string Event(const json& j) {
  return "event: " + j["type"].get<std::string>() + "\n" + SseData(j);
}

std::string ToolUseId(const AnthropicContext& ctx, int index) {
  return "toolu_" + ctx.id + "_" + std::to_string(index);
}

json TextBlockJson(const std::string& text) {
  return json{{"type", "text"}, {"text", text}};
}

json MessageShell(const AnthropicContext& ctx) {
  return json{{"id", ctx.id},           {"type", "message"},
              {"role", "assistant"},    {"content", json::array()},
              {"model", ctx.model},     {"stop_reason", nullptr},
              {"stop_sequence", nullptr}};
}

// Returns the stop_sequence field: the client's stop string that matched.
json StopSequence(const CompletionResult& result, const AnthropicContext& ctx) {
  const auto& stops = ctx.stop_sequences;
  if (result.stop_type != "word" ||
      std::find(stops.begin(), stops.end(), result.stopping_word) ==
          stops.end()) {
    return nullptr;
  }
  return result.stopping_word;
}

}  // namespace

std::optional<json> ParseToolCall(const std::string& text,
                                  const std::vector<std::string>& tool_names) {
  if (tool_names.empty()) return std::nullopt;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.size() != 1 || !j.contains("tool_call")) {
    return std::nullopt;
  }
  const json& call = j["tool_call"];
  if (!call.is_object() || !call.contains("name") ||
      !call["name"].is_string()) {
    return std::nullopt;
  }
  const std::string name = call["name"].get<std::string>();
  if (std::find(tool_names.begin(), tool_names.end(), name) ==
      tool_names.end()) {
    return std::nullopt;
  }
  json input = call.contains("input") ? call["input"] : json::object();
  if (!input.is_object()) return std::nullopt;
  return json{{"name", name}, {"input", std::move(input)}};
}

std::string AnthropicStopReason(const CompletionResult& result,
                                const AnthropicContext& ctx) {
  if (result.stop_type == "limit" || result.truncated) return "max_tokens";
  return StopSequence(result, ctx).is_null() ? "end_turn" : "stop_sequence";
}

json AnthropicUsageJson(const CompletionResult& result) {
  const uint64_t cached =
      std::min(result.timings.cache_n, result.tokens_evaluated);
  return json{{"cache_read_input_tokens", cached},
              {"input_tokens", result.tokens_evaluated - cached},
              {"output_tokens", result.tokens_predicted}};
}

json AnthropicMessageJson(const CompletionResult& result,
                          const AnthropicContext& ctx) {
  json out = MessageShell(ctx);
  if (auto call = ParseToolCall(result.content, ctx.tool_names)) {
    out["content"].push_back(json{{"type", "tool_use"},
                                  {"id", ToolUseId(ctx, 0)},
                                  {"name", (*call)["name"]},
                                  {"input", (*call)["input"]}});
    out["stop_reason"] = "tool_use";
  } else {
    out["content"].push_back(TextBlockJson(result.content));
    out["stop_reason"] = AnthropicStopReason(result, ctx);
    out["stop_sequence"] = StopSequence(result, ctx);
  }
  out["usage"] = AnthropicUsageJson(result);
  return out;
}

// --- stream -------------------------------------------------------------

AnthropicStreamFormatter::AnthropicStreamFormatter(AnthropicContext ctx)
    : ctx_(std::move(ctx)) {}

std::string AnthropicStreamFormatter::StartOnce() {
  if (started_) return "";
  started_ = true;
  json message = MessageShell(ctx_);
  // The cache hit is known only at the end (message_delta carries it).
  message["usage"] = {{"cache_read_input_tokens", 0},
                      {"input_tokens", ctx_.prompt_tokens},
                      {"output_tokens", 0}};
  return Event(json{{"type", "message_start"}, {"message", message}});
}

std::string AnthropicStreamFormatter::EmitText(const std::string& text) {
  std::string out;
  if (!block_open_) {
    block_open_ = true;
    out += Event(json{{"type", "content_block_start"},
                      {"index", next_index_},
                      {"content_block", TextBlockJson("")}});
  }
  if (text.empty()) return out;
  return out + Event(json{{"type", "content_block_delta"},
                          {"index", next_index_},
                          {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string AnthropicStreamFormatter::CloseBlock() {
  if (!block_open_) return "";
  block_open_ = false;
  return Event(json{{"type", "content_block_stop"}, {"index", next_index_++}});
}

std::string AnthropicStreamFormatter::ToolUseBlock(const json& call) {
  const int index = next_index_;
  std::string out = Event(json{{"type", "content_block_start"},
                               {"index", index},
                               {"content_block",
                                {{"type", "tool_use"},
                                 {"id", ToolUseId(ctx_, index)},
                                 {"name", call["name"]},
                                 {"input", json::object()}}}});
  out += Event(json{{"type", "content_block_delta"},
                    {"index", index},
                    {"delta",
                     {{"type", "input_json_delta"},
                      {"partial_json", DumpJson(call["input"])}}}});
  block_open_ = true;
  return out + CloseBlock();
}

std::string AnthropicStreamFormatter::Token(const TokenEvent& event,
                                            int /*slot*/) {
  std::string out = StartOnce();
  if (event.text.empty()) return out;
  streamed_ += event.text;
  held_ += event.text;
  // With tools, an answer starting with "{" may be a tool call: hold it.
  const size_t first = held_.find_first_not_of(" \t\r\n");
  const bool maybe_call =
      !ctx_.tool_names.empty() && !block_open_ &&
      (first == std::string::npos || held_[first] == '{');
  if (maybe_call) return out;
  out += EmitText(held_);
  held_.clear();
  return out;
}

std::string AnthropicStreamFormatter::Done(const CompletionResult& result) {
  std::string out = StartOnce();
  if (result.content.compare(0, streamed_.size(), streamed_) == 0) {
    held_ += result.content.substr(streamed_.size());
  }
  std::string stop_reason = AnthropicStopReason(result, ctx_);
  json stop_sequence = StopSequence(result, ctx_);
  std::optional<json> call;
  if (!block_open_) call = ParseToolCall(held_, ctx_.tool_names);
  if (call.has_value()) {
    out += ToolUseBlock(*call);
    stop_reason = "tool_use";
    stop_sequence = nullptr;
  } else {
    out += EmitText(held_);  // apart: operands of + run in any order
    out += CloseBlock();
  }
  held_.clear();
  out += Event(json{{"type", "message_delta"},
                    {"delta",
                     {{"stop_reason", stop_reason},
                      {"stop_sequence", stop_sequence}}},
                    {"usage", AnthropicUsageJson(result)}});
  return out + Event(json{{"type", "message_stop"}});
}

}  // namespace kvault
