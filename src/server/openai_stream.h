// The OpenAI streams: /v1/completions and /v1/chat/completions as
// Server-Sent Events chunks (openai_codec.h has the requests and the whole
// replies), and the logprobs entries they carry.
#ifndef KVAULT_SERVER_OPENAI_STREAM_H_
#define KVAULT_SERVER_OPENAI_STREAM_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/chat_reply.h"
#include "server/openai_codec.h"
#include "server/sse_sink.h"

namespace kvault {

// The logprobs of streamed tokens not yet sent. A token whose text is held
// back (part of a UTF-8 sequence, a possible stop string, a tool-call
// marker) sends its entry with the next chunk that goes out, so every
// generated token's entry is streamed once, in order.
class StreamedLogprobs {
 public:
  // Records nothing unless ctx asked for logprobs (n_probs > 0).
  explicit StreamedLogprobs(const OaiContext& ctx);
  // Records `event`'s entry.
  void Add(const TokenEvent& event);
  // Moves the recorded entries into chunk's choices[0].logprobs.content;
  // leaves `chunk` alone when there are none.
  void MoveInto(nlohmann::json& chunk);

 private:
  const Tokenizer* tokenizer_;  // null: logprobs were not asked for
  nlohmann::json entries_ = nlohmann::json::array();
};

// Streams /v1/completions: text_completion chunks, the last one with
// finish_reason and usage, then "data: [DONE]".
class OaiCompletionStreamFormatter : public StreamFormatter {
 public:
  explicit OaiCompletionStreamFormatter(OaiContext ctx);
  // Returns a chunk with the token's text ("" when it releases none).
  std::string Token(const TokenEvent& event, int slot) override;
  // Returns a chunk with no text and the prompt_progress object.
  std::string Progress(const PromptProgress& progress, int slot) override;
  // Returns the last chunk and [DONE].
  std::string Done(const CompletionResult& result) override;

 private:
  nlohmann::json Chunk(const std::string& text,
                       const nlohmann::json& finish_reason) const;
  OaiContext ctx_;
  std::string streamed_;
  StreamedLogprobs logprobs_;
};

// Streams /v1/chat/completions: a first chunk with delta {role:"assistant"},
// content deltas, a last chunk with an empty delta, finish_reason and usage,
// then "data: [DONE]".
class OaiChatStreamFormatter : public StreamFormatter {
 public:
  explicit OaiChatStreamFormatter(OaiContext ctx);
  // Returns the role chunk (first call) and a content delta chunk.
  std::string Token(const TokenEvent& event, int slot) override;
  // Returns a chunk with the role delta and the prompt_progress object
  // (the role chunk itself still comes before the first content).
  std::string Progress(const PromptProgress& progress, int slot) override;
  // Returns the held-back text, the finish chunk and [DONE].
  std::string Done(const CompletionResult& result) override;

 private:
  nlohmann::json Chunk(nlohmann::json delta,
                       const nlohmann::json& finish_reason) const;
  // Returns the role chunk the first time, "" afterwards.
  std::string RoleChunkOnce();
  // Returns one chunk per delta object, the first with the logprobs not
  // yet sent.
  std::string DeltaChunks(const std::vector<nlohmann::json>& deltas,
                          const TokenEvent* event);
  OaiContext ctx_;
  bool sent_role_ = false;
  std::string streamed_;
  StreamedLogprobs logprobs_;
  std::optional<ChatReplyReader> reader_;  // with ctx_.chat_syntax
};

}  // namespace kvault

#endif  // KVAULT_SERVER_OPENAI_STREAM_H_
