// Which tool-call syntax a chat template teaches, found from the marker
// strings in its Jinja source.
#ifndef KVAULT_CHAT_FORMAT_DETECT_H_
#define KVAULT_CHAT_FORMAT_DETECT_H_

#include <string_view>

#include "chat/chat_syntax.h"

namespace kvault::chat {

// Returns the format `template_source` renders tool calls in; kGeneric when
// it does not render them in a syntax this module knows (including
// templates that ignore `tools` altogether).
ToolCallFormat DetectToolCallFormat(std::string_view template_source);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_FORMAT_DETECT_H_
