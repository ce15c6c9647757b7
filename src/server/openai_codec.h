// The OpenAI-compatible endpoints: POST /v1/completions and
// POST /v1/chat/completions (request parsing, responses, stream chunks
// ending with "data: [DONE]") and GET /v1/models. Requests accept
// llama-server's extra sampling fields (top_k, min_p, ...) as well.
#ifndef KVAULT_SERVER_OPENAI_CODEC_H_
#define KVAULT_SERVER_OPENAI_CODEC_H_

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

namespace kvault {

// What every OpenAI response object repeats.
struct OaiContext {
  std::string id;       // "cmpl-<n>" or "chatcmpl-<n>"
  int64_t created = 0;  // Unix seconds
  std::string model;    // the model's id as /v1/models lists it
  // stream_options.include_usage: a chat stream ends with a chunk of
  // usage and no choices.
  bool include_usage = false;
  bool timings_per_token = false;  // llama-server: timings on every chunk
  // logprobs / top_logprobs (n_probs > 0): each choice carries
  // logprobs.content, one entry per token, spelled by `tokenizer`.
  uint32_t n_probs = 0;
  const Tokenizer* tokenizer = nullptr;
  // Chat: the reply is read back into reasoning_content and tool_calls
  // (CompletionRequest::chat_syntax); unset: content as generated.
  std::optional<chat::ChatSyntax> chat_syntax;
};

// Returns {"content": [{id, token, bytes, logprob, top_logprobs}...]} for
// the tokens of `events` (llama-server's OpenAI logprobs).
nlohmann::json OaiLogprobsJson(const std::vector<TokenEvent>& events,
                               const Tokenizer& tokenizer);

// Returns the system_fingerprint OpenAI replies carry (llama-server's
// convention: it begins with "b").
std::string SystemFingerprint();

// Parses a /v1/completions body: prompt (as /completion), max_tokens (or
// n_predict), n (only 1), stream, stop, temperature, top_p, seed and the
// llama-server fields.
StatusOr<CompletionRequest> ParseOaiCompletionRequest(
    const nlohmann::json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits);

// Returns the messages of a chat body: `messages` must be a non-empty array
// of {role: string, content: string | [{type:"text", text}] | null}, not
// ending with two assistant messages (as llama-server).
StatusOr<std::vector<ChatMessage>> ParseChatMessages(
    const nlohmann::json& body);

// Returns the request for chat `messages`: the generation fields of
// `fields` (as ParseGenerationFields), the messages rendered with `family`
// (generation prompt added) and tokenized (BOS per the vocabulary, special
// tokens parsed), the family's stop strings added to `stop`.
StatusOr<CompletionRequest> BuildChatRequest(
    const nlohmann::json& fields, const std::vector<ChatMessage>& messages,
    const Tokenizer& tokenizer, const CompletionLimits& limits,
    const ChatFormat& format, bool add_generation_prompt = true,
    const nlohmann::ordered_json* ordered_body = nullptr);

// Returns `messages` rendered with `family` (generation prompt added) and
// tokenized as BuildChatRequest does.
StatusOr<std::vector<TokenId>> TokenizeChat(
    const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer,
    const ChatFormat& format, bool add_generation_prompt = true,
    const nlohmann::ordered_json* raw_messages = nullptr,
    const nlohmann::ordered_json* vars = nullptr);

// Returns `messages` rendered with `family` as text, before tokenization,
// less a leading BOS (trailing EOS) the template wrote when the tokenizer
// adds one (as llama-server), so the prompt holds exactly one.
StatusOr<std::string> ChatPromptText(const std::vector<ChatMessage>& messages,
                                     const Tokenizer& tokenizer,
                                     const ChatFormat& format,
                                     bool add_generation_prompt = true,
                                     const nlohmann::ordered_json* raw_messages = nullptr,
                                     const nlohmann::ordered_json* vars = nullptr);

// POST /apply-template: {messages, add_generation_prompt?} ->
// {"prompt": the rendered text}, as /v1/chat/completions would render it.
// `ordered` is the same body with its keys in the client's order (what
// the template sees), or null.
StatusOr<nlohmann::json> ApplyTemplate(const nlohmann::json& body,
                                       const nlohmann::ordered_json* ordered,
                                       const Tokenizer& tokenizer,
                                       const ChatFormat& format);

// Returns body[key] unless absent or null (body may be null).
const nlohmann::ordered_json* OrderedField(const nlohmann::ordered_json* body,
                                           const char* key);

// A chat request's prompt as the chat route runs it: messages through the
// template with tools, reasoning variables, the generic tool prompt and a
// continued final assistant message; `plan` says how to read the reply.
struct ChatPrompt {
  std::vector<TokenId> tokens;
  ChatToolPlan plan;
};
StatusOr<ChatPrompt> BuildChatPrompt(const nlohmann::json& body,
                                     const nlohmann::ordered_json* ordered,
                                     const Tokenizer& tokenizer,
                                     const ChatFormat& format,
                                     const ChatOutputOptions& options);

// Parses a /v1/chat/completions body: the messages rendered with `family`
// (generation prompt added) and tokenized (BOS per the vocabulary, special
// tokens parsed), max_tokens / max_completion_tokens, the family's stop
// strings added to `stop`.
StatusOr<CompletionRequest> ParseOaiChatRequest(const nlohmann::json& body,
                                                const Tokenizer& tokenizer,
                                                const CompletionLimits& limits,
                                                const ChatFormat& format,
                                                const nlohmann::ordered_json* ordered = nullptr);

// Returns "length" when the result ended at a token limit, else "stop".
std::string FinishReason(const CompletionResult& result);

// Returns {prompt_tokens, completion_tokens, total_tokens,
// prompt_tokens_details: {cached_tokens}}.
nlohmann::json UsageJson(const CompletionResult& result);

// Returns the non-streamed text_completion object; `events` give the
// logprobs when ctx.n_probs > 0.
nlohmann::json OaiCompletionJson(const CompletionResult& result,
                                 const OaiContext& ctx,
                                 const std::vector<TokenEvent>& events = {});
// Returns the non-streamed chat.completion object (logprobs as above).
nlohmann::json OaiChatJson(const CompletionResult& result,
                           const OaiContext& ctx,
                           const std::vector<TokenEvent>& events = {});

// The GET /v1/models answer: one model.
struct OaiModelInfo {
  std::string id;
  int64_t created = 0;
  uint64_t n_vocab = 0;
  uint64_t n_ctx_train = 0;
  uint64_t n_params = 0;
  uint64_t size_bytes = 0;
  std::vector<std::string> aliases;  // --alias, sorted (id is the first)
  std::vector<std::string> tags;     // --tags
};
// Returns {"object":"list","data":[{"id","object":"model",...,"meta"}]}.
nlohmann::json OaiModelsJson(const OaiModelInfo& info);

// Returns the fields every OpenAI object and chunk repeats (id, object,
// created, model, system_fingerprint) around `choices`.
nlohmann::json OaiEnvelope(const char* object, const OaiContext& ctx,
                           nlohmann::json choices);

}  // namespace kvault

#endif  // KVAULT_SERVER_OPENAI_CODEC_H_
