// OpenAI's Responses API as llama-server serves it: POST /v1/responses
// (also /responses): `input` (a string or message items) and
// `instructions` -> chat messages -> CompletionRequest through the chat
// template; the "response" object; the streamed events response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta/done,
// response.content_part.done, response.output_item.done,
// response.completed. Field list: docs/http_api.md.
#ifndef KVAULT_SERVER_RESPONSES_CODEC_H_
#define KVAULT_SERVER_RESPONSES_CODEC_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "model/tokenizer.h"
#include "server/chat_format.h"
#include "server/chat_reply.h"
#include "server/chat_template.h"
#include "server/completion_codec.h"
#include "server/sse_sink.h"

namespace kvault {

// A parsed /v1/responses body.
struct ResponsesRequest {
  CompletionRequest completion;
  bool timings_per_token = false;  // llama-server: timings on each delta
  bool return_progress = false;    // llama-server: prompt_progress event
  nlohmann::json metadata;         // echoed back (null when absent)
};

// What the reply needs to know of the request.
struct ResponsesContext {
  std::string id;          // "resp_<n>"
  std::string message_id;  // "msg_<n>"
  std::string model;
  int64_t created = 0;  // Unix seconds
  uint64_t prompt_tokens = 0;
  bool timings_per_token = false;
  bool return_progress = false;
  nlohmann::json metadata;
  // With function tools: the reply is read back into function_call items.
  std::optional<chat::ChatSyntax> chat_syntax;
};

// Returns the chat messages of a Responses body: `instructions` as a system
// message, then `input` (a string: one user message; or an array of message
// items, role user/assistant/system/developer, content a string or
// input_text/output_text parts). InvalidArgument naming the field for
// another item or part type; ImageNotSupportedError for input_image.
// Returns the text of an item's content: a string, or input_text /
// output_text / refusal parts joined with newlines; errors name `field`.
StatusOr<std::string> ResponsesItemText(const nlohmann::json& content,
                                        const std::string& field);

StatusOr<std::vector<ChatMessage>> ResponsesChatMessages(
    const nlohmann::json& body);

// Parses a /v1/responses body: input, instructions, max_output_tokens,
// temperature, top_p, stream, metadata, llama-server's sampling fields,
// timings_per_token, return_progress; function `tools`, `tool_choice` and
// function_call / function_call_output items through the chat route
// (`ordered`: the body with its keys in the client's order, for the tools'
// schemas). The API's fields kvault cannot honour (previous_response_id,
// reasoning, hosted tools, ...) are a 400 naming the field.
StatusOr<ResponsesRequest> ParseResponsesRequest(
    const nlohmann::json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits, const ChatFormat& format,
    const nlohmann::ordered_json* ordered = nullptr);

// Returns {input_tokens, output_tokens, total_tokens,
// input_tokens_details: {cached_tokens}}.
nlohmann::json ResponsesUsageJson(const CompletionResult& result);

// Returns the non-streamed "response" object. With ctx.chat_syntax the
// reply is parsed into a reasoning item, the message and function_call
// items; `parsed` is a stream's own parse (same ids, its item order).
nlohmann::json ResponsesJson(const CompletionResult& result,
                             const ResponsesContext& ctx,
                             const chat::ChatMessage* parsed = nullptr);

// Streams /v1/responses. Per-token timings (timings_per_token) are measured
// here, from the request's submission: the engine reports its own timings
// only with the result, which response.completed carries.
class ResponsesStreamFormatter : public StreamFormatter {
 public:
  explicit ResponsesStreamFormatter(ResponsesContext ctx);
  // Returns response.created and response.in_progress (the request got a
  // slot).
  std::string Start(int slot) override;
  // Returns a response.in_progress event carrying prompt_progress (and,
  // with timings_per_token, timings) when the request asked for
  // return_progress; the opening events first if not sent yet.
  std::string Progress(const PromptProgress& progress, int slot) override;
  // Returns the message item's opening events (first call) and a delta.
  std::string Token(const TokenEvent& event, int slot) override;
  // Returns the last delta and the closing events.
  std::string Done(const CompletionResult& result) override;

 private:
  using Clock = std::chrono::steady_clock;
  std::string Event(nlohmann::json j);
  // response.created and response.in_progress, once.
  std::string OpenOnce();
  // OpenOnce, then the message item's opening events, once.
  std::string FirstTokenOnce();
  nlohmann::json LiveTimings() const;
  std::string Delta(const std::string& text);
  // The events that close the message item (output_index 0) with `text`.
  std::string MessageDone(const std::string& text);
  // Done() with the reply parsed: the message, then function_call items.
  std::string DoneParsed(const CompletionResult& result);
  ResponsesContext ctx_;
  Clock::time_point submitted_ = Clock::now();
  Clock::time_point first_token_;
  bool opened_ = false;
  bool message_added_ = false;
  uint64_t tokens_ = 0;
  int sequence_ = 0;
  std::string streamed_;
  std::optional<ChatReplyReader> reader_;  // with ctx_.chat_syntax
};

}  // namespace kvault

#endif  // KVAULT_SERVER_RESPONSES_CODEC_H_
