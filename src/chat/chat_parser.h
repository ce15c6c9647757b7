// Parsing a chat model's generated text back into OpenAI's message shape.
#ifndef KVAULT_CHAT_CHAT_PARSER_H_
#define KVAULT_CHAT_CHAT_PARSER_H_

#include <string_view>

#include "chat/chat_syntax.h"

namespace kvault::chat {

// Splits generated `text` into content, reasoning_content and tool_calls per
// `syntax`. With `is_partial` (a prefix of a longer generation) it reports
// only what later text cannot change: text that may start a marker, an
// unfinished call, trailing whitespace and a split UTF-8 character are held
// back, so successive results only grow. With !is_partial, text that does
// not parse as a call stays content. Never throws; never drops text.
ChatMessage ParseChatOutput(std::string_view text, const ChatSyntax& syntax,
                            bool is_partial);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_CHAT_PARSER_H_
