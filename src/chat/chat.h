// kvault_chat's public surface in one include: parsing a chat model's
// output into content / reasoning_content / tool_calls, streaming deltas,
// template format detection, and the grammars that force a tool call.
#ifndef KVAULT_CHAT_CHAT_H_
#define KVAULT_CHAT_CHAT_H_

#include "chat/chat_deltas.h"
#include "chat/chat_parser.h"
#include "chat/chat_syntax.h"
#include "chat/format_detect.h"
#include "chat/tool_grammar.h"

#endif  // KVAULT_CHAT_CHAT_H_
