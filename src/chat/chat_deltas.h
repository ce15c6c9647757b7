// OpenAI streaming deltas between two successive parses of a growing reply.
#ifndef KVAULT_CHAT_CHAT_DELTAS_H_
#define KVAULT_CHAT_CHAT_DELTAS_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "chat/chat_syntax.h"

namespace kvault::chat {

// Returns the `delta` objects that take a client from `prev` to `next`
// (ParseChatOutput results for successive prefixes of one reply), in order:
// {"reasoning_content": ..}, {"content": ..}, then one {"tool_calls": [..]}
// per call that is new or whose arguments grew. A new call's first delta
// carries index, id (when known), type and name; later ones only index and
// the arguments' new text. Fields of `next` that do not extend `prev`
// (which ParseChatOutput never produces) yield nothing.
std::vector<nlohmann::ordered_json> ChatDeltas(const ChatMessage& prev,
                                               const ChatMessage& next);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_CHAT_DELTAS_H_
