#include "chat/chat_parser.h"

#include <algorithm>
#include <string>
#include <vector>

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

namespace {

using Json = nlohmann::ordered_json;

// The JSON schema type names `v` satisfies.
std::vector<std::string> TypesOf(const Json& v) {
  if (v.is_number_integer()) return {"integer", "number"};
  if (v.is_number()) return {"number"};
  if (v.is_boolean()) return {"boolean"};
  if (v.is_null()) return {"null"};
  if (v.is_object()) return {"object"};
  if (v.is_array()) return {"array"};
  return {"string"};
}

// The schema of argument `arg` of tool `fn` in OpenAI `tools`, or null.
const Json* ArgumentSchema(const Json& tools, const std::string& fn,
                           const std::string& arg) {
  if (!tools.is_array()) return nullptr;
  for (const Json& t : tools) {
    if (!t.is_object() || !t.contains("function")) continue;
    const Json& f = t["function"];
    if (!f.is_object() || f.value("name", "") != fn) continue;
    const Json* props = nullptr;
    if (f.contains("parameters") && f["parameters"].is_object() &&
        f["parameters"].contains("properties")) {
      props = &f["parameters"]["properties"];
    }
    if (props == nullptr || !props->is_object() || !props->contains(arg)) {
      return nullptr;
    }
    return &(*props)[arg];
  }
  return nullptr;
}

// True when `schema` allows a string but not the type `guessed` has.
bool WantsTheText(const Json& schema, const Json& guessed) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const Json& type = schema["type"];
  std::vector<std::string> allowed;
  if (type.is_string()) allowed.push_back(type.get<std::string>());
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string()) allowed.push_back(t.get<std::string>());
    }
  }
  if (std::find(allowed.begin(), allowed.end(), "string") == allowed.end()) {
    return false;
  }
  for (const std::string& t : TypesOf(guessed)) {
    if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) {
      return false;
    }
  }
  return true;
}

// Puts back the model's text for XML-style arguments whose schema says
// string where the parser guessed another JSON type.
void RetypeArguments(const Json& tools, ChatMessage* msg) {
  for (ToolCall& call : msg->tool_calls) {
    if (call.raw_arguments.empty()) continue;
    Json args = Json::parse(call.arguments, nullptr, false);
    if (!args.is_object()) continue;
    bool changed = false;
    for (const auto& [name, raw] : call.raw_arguments) {
      const Json* schema = ArgumentSchema(tools, call.name, name);
      if (schema == nullptr || !args.contains(name) ||
          args[name].is_string() || !WantsTheText(*schema, args[name])) {
        continue;
      }
      args[name] = raw;
      changed = true;
    }
    if (changed) call.arguments = DumpJson(args);
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
  if (syntax.tools != nullptr) RetypeArguments(*syntax.tools, &msg);
  for (ToolCall& call : msg.tool_calls) call.raw_arguments.clear();
  return msg;
}

}  // namespace kvault::chat
