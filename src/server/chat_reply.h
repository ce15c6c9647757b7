// ChatReplyReader: a chat reply read back as OpenAI's assistant message --
// content, reasoning_content and tool_calls (src/chat parses them) -- whole,
// or as stream deltas while it is generated. Tool calls the model's format
// gives no id get one here: "call_" and 24 random alphanumerics, fixed per
// call for the whole stream.
#ifndef KVAULT_SERVER_CHAT_REPLY_H_
#define KVAULT_SERVER_CHAT_REPLY_H_

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_syntax.h"

namespace kvault {

class ChatReplyReader {
 public:
  explicit ChatReplyReader(chat::ChatSyntax syntax);

  // Returns {"role": "assistant", "content": ..., ["reasoning_content"],
  // ["tool_calls"]} for the whole reply `text` (content null when empty
  // and there are tool calls, as OpenAI sends it). `cut_off`: the reply
  // ended at its token limit, so a call it was writing is reported as far
  // as it got (its arguments unfinished), as OpenAI reports one.
  nlohmann::json Message(std::string_view text, bool cut_off = false);
  // Appends generated `text`; returns the delta objects since the last
  // call (none while a marker may still be forming). A call being written
  // shows as soon as its name is whole, its arguments growing with it
  // (formats whose arguments are JSON).
  std::vector<nlohmann::json> Feed(std::string_view text);
  // Returns the deltas that complete the message once generation ended
  // (`cut_off` as for Message).
  std::vector<nlohmann::json> Finish(bool cut_off = false);
  // Returns true once the reply holds a tool call.
  bool has_tool_calls() const { return !sent_.tool_calls.empty(); }
  // Returns how many bytes of reply text were fed.
  size_t fed_bytes() const { return text_.size(); }
  // Returns the message as last parsed (ids assigned).
  const chat::ChatMessage& message() const { return sent_; }

 private:
  // Parses `text` whole; with `cut_off`, an unfinished last call counts.
  chat::ChatMessage ParseWhole(std::string_view text, bool cut_off) const;
  // Returns the deltas from what was sent to `next` (ids assigned).
  std::vector<nlohmann::json> Advance(chat::ChatMessage next);
  // Gives calls without an id theirs (the same one on every parse).
  void AssignIds(chat::ChatMessage* message);

  chat::ChatSyntax syntax_;
  std::string text_;
  chat::ChatMessage sent_;
  std::vector<std::string> ids_;  // by call index
  std::mt19937_64 rng_;
};

// OpenAI's finish_reason for a chat reply: "tool_calls" when it ended
// normally with calls, else `finish_reason` ("stop", "length").
std::string ChatFinishReason(const std::string& finish_reason,
                             bool has_tool_calls);

}  // namespace kvault

#endif  // KVAULT_SERVER_CHAT_REPLY_H_
