// Anthropic's Messages API as llama-server serves it: POST /v1/messages
// (request -> chat messages -> CompletionRequest through the chat template;
// the "message" reply; the streamed event sequence message_start,
// content_block_start/delta/stop, message_delta, message_stop) and
// POST /v1/messages/count_tokens. Field list: docs/http_api.md.
//
// Tools: kvault has no grammar-constrained tool calling, so client tools are
// described to the model in the system turn, with the answer format
// {"tool_call": {"name": ..., "input": {...}}}; a reply that is exactly such
// an object naming a declared tool becomes a tool_use block. History
// tool_use blocks are rendered in that same format, tool_result blocks as
// user text.
#ifndef KVAULT_SERVER_ANTHROPIC_CODEC_H_
#define KVAULT_SERVER_ANTHROPIC_CODEC_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "model/tokenizer.h"
#include "server/chat_format.h"
#include "server/chat_template.h"
#include "server/completion_codec.h"
#include "server/sse_sink.h"

namespace kvault {

// The message of every image block: llama-server's answer (HTTP 500) for a
// model without a multimodal projector, which kvault never has.
inline constexpr char kImageNotSupported[] =
    "image input is not supported - hint: if this is unexpected, you may need "
    "to provide the mmproj";

// Returns the Internal (HTTP 500) error llama-server gives for image input,
// reason "image_not_supported".
Status ImageNotSupportedError();

// What the reply needs to know of the request.
struct AnthropicContext {
  std::string id;     // "msg_<n>"
  std::string model;  // the model's id
  std::vector<std::string> stop_sequences;  // the client's own stop strings
  std::vector<std::string> tool_names;      // tools the model may call
  uint64_t prompt_tokens = 0;
};

// A parsed /v1/messages body.
struct AnthropicRequest {
  CompletionRequest completion;
  std::vector<std::string> stop_sequences;
  std::vector<std::string> tool_names;  // empty when tool_choice is "none"
};

// Returns the chat messages of an Anthropic body: `system` (string or text
// blocks, plus the tool descriptions) first, then `messages` (string or
// content blocks). InvalidArgument naming the field for a bad shape or an
// unsupported block or field; ImageNotSupportedError for an image block.
StatusOr<std::vector<ChatMessage>> AnthropicChatMessages(
    const nlohmann::json& body, std::vector<std::string>* tool_names);

// Parses a /v1/messages body: max_tokens, temperature, top_p, top_k,
// stop_sequences, stream, metadata, thinking, tools, tool_choice, and
// llama-server's own sampling fields.
StatusOr<AnthropicRequest> ParseAnthropicRequest(
    const nlohmann::json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits, const ChatFormat& format);

// Returns {"input_tokens": n} for a /v1/messages/count_tokens body (the
// prompt /v1/messages would run; max_tokens not needed).
StatusOr<nlohmann::json> AnthropicCountTokens(const nlohmann::json& body,
                                              const Tokenizer& tokenizer,
                                              const ChatFormat& format);

// Returns the tool call `text` spells ({"tool_call": {"name", "input"}} with
// a name in `tool_names`, whitespace around it allowed), or nullopt.
std::optional<nlohmann::json> ParseToolCall(
    const std::string& text, const std::vector<std::string>& tool_names);

// Returns "max_tokens", "stop_sequence" (a client stop string matched),
// or "end_turn"; the caller uses "tool_use" for a tool call.
std::string AnthropicStopReason(const CompletionResult& result,
                                const AnthropicContext& ctx);

// Returns {input_tokens (not from cache), cache_read_input_tokens,
// output_tokens}.
nlohmann::json AnthropicUsageJson(const CompletionResult& result);

// Returns the non-streamed "message" object.
nlohmann::json AnthropicMessageJson(const CompletionResult& result,
                                    const AnthropicContext& ctx);

// Streams /v1/messages as Anthropic's named SSE events. With tools, text
// that may still become a tool call (it starts with "{") is held back until
// the end.
class AnthropicStreamFormatter : public StreamFormatter {
 public:
  explicit AnthropicStreamFormatter(AnthropicContext ctx);
  // Returns message_start (first call) and the text's block events.
  std::string Token(const TokenEvent& event, int slot) override;
  // Returns the last text or the tool_use block, message_delta and
  // message_stop.
  std::string Done(const CompletionResult& result) override;

 private:
  std::string StartOnce();
  std::string EmitText(const std::string& text);
  std::string CloseBlock();
  std::string ToolUseBlock(const nlohmann::json& call);
  AnthropicContext ctx_;
  bool started_ = false;
  bool block_open_ = false;
  int next_index_ = 0;
  std::string streamed_;  // text of every token event so far
  std::string held_;      // text not sent yet (a possible tool call)
};

}  // namespace kvault

#endif  // KVAULT_SERVER_ANTHROPIC_CODEC_H_
