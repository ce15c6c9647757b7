// llama-server's native completion API: POST /completion request fields ->
// CompletionParams, CompletionResult -> response JSON, the streamed token
// objects, and the prompt / tokenize / detokenize conversions. Field list
// and examples: docs/http_api.md.
#ifndef KVAULT_SERVER_COMPLETION_CODEC_H_
#define KVAULT_SERVER_COMPLETION_CODEC_H_

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_syntax.h"
#include "core/status_or.h"
#include "engine/engine.h"
#include "model/tokenizer.h"
#include "server/chat_tools.h"
#include "server/grammar_fields.h"
#include "server/sse_sink.h"

namespace kvault {

// Bounds a request is checked against; 0 disables a check.
struct CompletionLimits {
  uint32_t n_ctx_slot = 0;       // prompt tokens allowed (a slot's context)
  uint32_t n_slots = 0;          // id_slot must be below
  uint32_t max_n_probs = 100;
  // What omitted fields take: the server's --temp, --seed, -n, ... (its
  // prompt is ignored).
  CompletionParams defaults;
  // Tokenizes logit_bias texts and finds end-of-generation tokens for
  // ignore_eos; null: text keys are refused, ignore_eos adds no bias.
  const Tokenizer* tokenizer = nullptr;
  // The request itself with its keys in the client's order, when the
  // caller has it: a JSON schema's properties keep that order. Null:
  // alphabetical.
  const nlohmann::ordered_json* ordered_body = nullptr;
  // The chat route's reasoning and parsing settings (--reasoning-format,
  // --reasoning, --reasoning-effort, --skip-chat-parsing).
  ChatOutputOptions chat_output;
  // KVAULT_TEST_HOOKS was set when the server started: a chat request may
  // script the reply ("__kvault_scripted_output", see SamplingParams).
  bool test_hooks = false;
  // Compiles a grammar field's grammar for the request (the server's
  // GrammarCompiler, watching the client); empty: inline.
  GrammarCompileFn compile_grammar;
};

struct CompletionRequest {
  CompletionParams params;
  bool stream = false;
  bool return_tokens = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  // response_fields: the reply keeps only these ("a/b" names a nested
  // field and becomes a top-level key of that name); empty: everything.
  std::vector<std::string> response_fields;
  // "verbose": OpenAI replies carry "__verbose", llama-server's native
  // result (prompt text included), for debugging templates.
  bool verbose = false;
  // llama-server: every streamed chunk carries the timings so far.
  bool timings_per_token = false;
  // Chat route: how the reply is read back into content, reasoning_content
  // and tool_calls; unset: the text is the content as generated.
  std::optional<chat::ChatSyntax> chat_syntax;
};

// Returns the tokens of a prompt value: a string (tokenized with add_special
// as the vocabulary wants when `add_special`, parse_special on), an array of
// token ids, or a mixed array of ids and strings (BOS only before a leading
// string). `field` names the field in errors (e.g. "prompt"). InvalidArgument
// for another type, a nested array, or an id outside [0, n_vocab).
StatusOr<std::vector<TokenId>> TokenizePrompt(const nlohmann::json& prompt,
                                              const Tokenizer& tokenizer,
                                              bool add_special,
                                              std::string_view field);

// Reads the generation fields (everything but the prompt: n_predict,
// temperature, top_k, top_p, min_p, seed, stop, stream, id_slot,
// cache_prompt, n_probs, return_tokens, ignore_eos, repeat_penalty,
// repeat_last_n) of `body` into `out`, checking types and `limits`.
Status ParseGenerationFields(const nlohmann::json& body,
                             const CompletionLimits& limits,
                             CompletionRequest* out);

// Lowers an API's own token limit to n_predict: unless `body` has
// n_predict, the first of `keys` it has (an integer in [min_value, 2^31];
// errors name that field) becomes (*fields)["n_predict"]. The one mapping
// of OpenAI's max_tokens / max_completion_tokens, the Responses API's
// max_output_tokens and Anthropic's max_tokens.
Status LowerTokenLimit(const nlohmann::json& body,
                       std::initializer_list<const char*> keys,
                       int64_t min_value, nlohmann::json* fields);

// Returns OK unless the prompt has no tokens: InvalidArgument reason
// "empty_prompt". (A prompt longer than a slot's context is answered by the
// route, as llama-server's exceed_context_size_error.)
Status CheckPromptLength(size_t num_tokens, const CompletionLimits& limits);

// Parses a POST /completion body (fields as above, plus the prompt).
StatusOr<CompletionRequest> ParseCompletionRequest(
    const nlohmann::json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits);

// Returns the sampling settings as llama-server's generation_settings /
// slot "params" object.
nlohmann::json GenerationSettingsJson(const CompletionParams& params);

// Returns the timings object (per-token and per-second rates 0 when n or ms
// is 0).
nlohmann::json TimingsJson(const CompletionTimings& timings);
// Returns llama-server's prompt_progress object: {total, cache, processed,
// time_ms}.
nlohmann::json PromptProgressJson(const PromptProgress& progress);

// Returns one completion_probabilities entry for `event`.
nlohmann::json TokenProbsJson(const TokenEvent& event,
                              const Tokenizer& tokenizer);

// Returns the non-streamed /completion response for `result`; `events` are
// the request's token events (for completion_probabilities).
nlohmann::json CompletionResponseJson(const CompletionRequest& request,
                                      const CompletionResult& result,
                                      const std::vector<TokenEvent>& events,
                                      const Tokenizer& tokenizer);

// Streams /completion: one {content, tokens?, stop:false, id_slot} object per
// token and a final object with stop:true and every final field, whose
// content is the text not streamed yet (held back for stop strings).
class CompletionStreamFormatter : public StreamFormatter {
 public:
  // `tokenizer` must outlive this object.
  CompletionStreamFormatter(CompletionRequest request,
                            const Tokenizer* tokenizer);
  // Returns the SSE event for one token ("" when it releases no text and
  // neither tokens nor probabilities were asked for).
  std::string Token(const TokenEvent& event, int slot) override;
  // Returns an event with no text and the prompt_progress object.
  std::string Progress(const PromptProgress& progress, int slot) override;
  // Returns the final event.
  std::string Done(const CompletionResult& result) override;

 private:
  CompletionRequest request_;
  const Tokenizer* tokenizer_;
  std::string streamed_;  // text sent so far
};

// POST /tokenize: {content, add_special=false, parse_special=true,
// with_pieces=false} -> {tokens: [id...]} or [{id, piece}...], as JSON
// text written token by token (a DOM of millions of pieces took ~700
// bytes per token).
StatusOr<std::string> HandleTokenize(const nlohmann::json& body,
                                     const Tokenizer& tokenizer);
// POST /detokenize: {tokens: [id...]} -> {content}.
StatusOr<nlohmann::json> HandleDetokenize(const nlohmann::json& body,
                                          const Tokenizer& tokenizer);

}  // namespace kvault

#endif  // KVAULT_SERVER_COMPLETION_CODEC_H_
