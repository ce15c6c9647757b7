// Per-format body parsers: each takes the text after any reasoning block
// and appends content and tool calls to a message. Internal to kvault_chat.
#ifndef KVAULT_CHAT_FORMAT_PARSERS_H_
#define KVAULT_CHAT_FORMAT_PARSERS_H_

#include <string_view>

#include "chat/chat_syntax.h"
#include "chat/scanner.h"

namespace kvault::chat {

// JSON-bodied families (json_formats.cc).
void ParseHermesBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseMistralBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseGraniteBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseAprielBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseCommandRBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseLlama3Body(std::string_view body, bool partial, ChatMessage* msg);
// The {"tool_call"|"tool_calls"|"response"} reply (generic_format.cc).
void ParseGenericBody(std::string_view body, bool partial, ChatMessage* msg);

// XML-argument families (xml_formats.cc).
void ParseQwen3CoderBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseSeedOssBody(std::string_view body, bool partial, ChatMessage* msg);
void ParseGlm45Body(std::string_view body, bool partial, ChatMessage* msg);
void ParseMiniMaxM2Body(std::string_view body, bool partial, ChatMessage* msg);
void ParseDsmlBody(std::string_view body, bool partial, ChatMessage* msg);
// Parses <function=NAME><parameter=P>v</parameter>...</function> at the
// cursor (Qwen3-Coder's call body, also accepted inside Hermes blocks).
Step ParseFunctionTag(Cursor* cur, ToolCall* call);
// Parses the JSON {"name":..,"arguments":..} object at the cursor.
Step ParseJsonCallObject(Cursor* cur, ToolCall* call);

// Special-token families (token_formats.cc).
void ParseDeepSeekR1Body(std::string_view body, bool partial, ChatMessage* msg);
void ParseDeepSeekV31Body(std::string_view body, bool partial,
                          ChatMessage* msg);
void ParseKimiK2Body(std::string_view body, bool partial, ChatMessage* msg);
void ParseFunctionaryV32Body(std::string_view body, bool partial,
                             ChatMessage* msg);

// GPT-OSS harmony messages, reasoning included (harmony_format.cc).
ChatMessage ParseHarmony(std::string_view text, const ChatSyntax& syntax,
                         bool partial);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_FORMAT_PARSERS_H_
