// Finding the reasoning block at the start of a model's output.
#ifndef KVAULT_CHAT_REASONING_H_
#define KVAULT_CHAT_REASONING_H_

#include <string_view>

#include "chat/chat_syntax.h"

namespace kvault::chat {

struct ReasoningTags {
  std::string_view open;
  std::string_view close;
};

// Returns the tags `f`'s models wrap reasoning in (<think>..</think> for
// most; empty for formats that frame reasoning otherwise, e.g. harmony).
ReasoningTags ReasoningTagsFor(ToolCallFormat f);

struct ReasoningSplit {
  // Streaming only: the text so far may still turn out to open a block, so
  // nothing can be reported yet.
  bool hold_all = false;
  bool has_block = false;      // a block was opened (closed or not)
  bool closed = false;         // ... and its close tag was seen
  std::string_view reasoning;  // its text, trimmed (streaming: a possible
                               // partial close tag held back)
  size_t body_start = 0;       // where the text after the block starts
};

// Locates a reasoning block at the start of `text` (after whitespace), or
// from the very start when `forced_open`; `partial` as in ParseChatOutput.
ReasoningSplit SplitReasoning(std::string_view text, ReasoningTags tags,
                              bool forced_open, bool partial);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_REASONING_H_
