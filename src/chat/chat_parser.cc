#include "chat/chat_parser.h"

#include <string>

#include "chat/format_parsers.h"
#include "chat/reasoning.h"
#include "chat/scanner.h"

namespace kvault::chat {
namespace {

using BodyParser = void (*)(std::string_view, bool, ChatMessage*);

BodyParser BodyParserFor(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kContentOnly:
      return nullptr;
    case ToolCallFormat::kGeneric:
      return ParseGenericBody;
    case ToolCallFormat::kHermes:
      return ParseHermesBody;
    case ToolCallFormat::kQwen3Coder:
      return ParseQwen3CoderBody;
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3Body;
    case ToolCallFormat::kMistral:
      return ParseMistralBody;
    case ToolCallFormat::kDeepSeekR1:
      return ParseDeepSeekR1Body;
    case ToolCallFormat::kDeepSeekV31:
      return ParseDeepSeekV31Body;
    case ToolCallFormat::kCommandR:
      return ParseCommandRBody;
    case ToolCallFormat::kGptOss:
      return nullptr;  // handled whole
    case ToolCallFormat::kGlm45:
      return ParseGlm45Body;
    case ToolCallFormat::kKimiK2:
      return ParseKimiK2Body;
    case ToolCallFormat::kMiniMaxM2:
      return ParseMiniMaxM2Body;
    case ToolCallFormat::kGranite:
      return ParseGraniteBody;
    case ToolCallFormat::kFunctionaryV32:
      return ParseFunctionaryV32Body;
    case ToolCallFormat::kSeedOss:
      return ParseSeedOssBody;
    case ToolCallFormat::kDeepSeekDsml:
      return ParseDsmlBody;
    case ToolCallFormat::kApriel:
      return ParseAprielBody;
  }
  return nullptr;
}

// Streaming results stop before a split UTF-8 character (a client cannot
// show half of one) and before trailing whitespace (it may turn out to
// border a call or a tag and be dropped).
void TrimPartialTail(std::string* s) {
  s->resize(CompleteUtf8Prefix(*s));
  s->resize(TrimTrailingSpace(*s).size());
}

// Reports the reasoning block per the reasoning format.
void PlaceReasoning(std::string_view text, const ReasoningSplit& split,
                    ReasoningTags tags, const ChatSyntax& syntax,
                    ChatMessage* msg) {
  if (!split.has_block) return;
  if (syntax.reasoning_format == ReasoningFormat::kNone) {
    msg->content += text.substr(0, split.body_start);  // verbatim
  } else if (syntax.reasoning_in_content) {
    msg->content += tags.open;
    msg->content += split.reasoning;
    if (split.closed) msg->content += tags.close;
  } else {
    msg->reasoning_content = split.reasoning;
  }
}

}  // namespace

ChatMessage ParseChatOutput(std::string_view text, const ChatSyntax& syntax,
                            bool is_partial) {
  ChatMessage msg;
  if (syntax.format == ToolCallFormat::kGptOss) {
    msg = ParseHarmony(text, syntax, is_partial);
  } else {
    ReasoningTags tags = ReasoningTagsFor(syntax.format);
    ReasoningSplit split =
        SplitReasoning(text, tags, syntax.thinking_forced_open, is_partial);
    if (split.hold_all) return msg;
    PlaceReasoning(text, split, tags, syntax, &msg);
    std::string_view body = text.substr(split.body_start);
    if (split.has_block && syntax.reasoning_format != ReasoningFormat::kNone) {
      body = TrimLeadingSpace(body);
    }
    BodyParser parse = BodyParserFor(syntax.format);
    if (parse != nullptr && syntax.parse_tool_calls) {
      parse(body, is_partial, &msg);
    } else {
      msg.content += body;
    }
  }
  if (is_partial) {
    TrimPartialTail(&msg.content);
    TrimPartialTail(&msg.reasoning_content);
  }
  return msg;
}

}  // namespace kvault::chat
