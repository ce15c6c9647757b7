// The vocabulary of chat-output parsing: which tool-call syntax a model
// speaks, how its reasoning is reported, and the OpenAI-shaped message that
// parsing produces. Engine-, model- and HTTP-independent.
#ifndef KVAULT_CHAT_CHAT_SYNTAX_H_
#define KVAULT_CHAT_CHAT_SYNTAX_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status_or.h"

namespace kvault::chat {

// The tool-call syntax a chat template teaches its model. Each value names
// the family that introduced it; docs/chat_output.md shows every shape.
enum class ToolCallFormat {
  kContentOnly,  // no tool calls: all text is content
  kGeneric,      // {"tool_call":..} | {"tool_calls":[..]} | {"response":..}
  kHermes,       // <tool_call>{"name":..,"arguments":..}</tool_call>
  kQwen3Coder,   // <tool_call><function=N><parameter=P>v</parameter>..
  kLlama3Json,   // {"name":..,"parameters":..} and <|python_tag|>
  kMistral,      // [TOOL_CALLS][{..}] and [TOOL_CALLS]name[ARGS]{..}
  kDeepSeekR1,  // <｜tool▁call▁begin｜>function<｜tool▁sep｜>N ```json..
  kDeepSeekV31,  // <｜tool▁call▁begin｜>N<｜tool▁sep｜>{..}
  kCommandR,     // <|START_ACTION|>[..]<|END_ACTION|> and Action: ```json
  kGptOss,       // harmony channels
  kGlm45,        // <tool_call>N<arg_key>k</arg_key><arg_value>v</arg_value>
  kKimiK2,       // <|tool_call_begin|>functions.N:i<|tool_call_argument_begin|>
  kMiniMaxM2,    // <minimax:tool_call><invoke name="N"><parameter name=..>
  kGranite,      // <|tool_call|>[{"name":..,"arguments":..}]
  kFunctionaryV32,  // N\n{..} then >>>N\n{..}; >>>all\n for text
  // Additions beyond the original list.
  kSeedOss,       // <seed:tool_call><function=N><parameter=P>v</parameter>..
  kDeepSeekDsml,  // <｜DSML｜invoke name="N"><｜DSML｜parameter name=..>
  kApriel,        // <tool_calls>[{"name":..,"arguments":..}]</tool_calls>
};

// How reasoning ("thinking") text is reported.
enum class ReasoningFormat {
  kNone,            // leave <think> text in content, tags included
  kDeepSeek,        // extract into reasoning_content
  kAuto,            // llama-server's default: same as kDeepSeek
  kDeepSeekLegacy,  // kDeepSeek, but streams keep it inline (see
                    // ChatSyntax::reasoning_in_content)
};

struct ChatSyntax {
  ToolCallFormat format = ToolCallFormat::kContentOnly;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  // The prompt ended inside a reasoning block (e.g. with "<think>\n"), so
  // the output starts as reasoning without an opening tag.
  bool thinking_forced_open = false;
  // False: tool-call syntax is left in content (tool_choice "none").
  bool parse_tool_calls = true;
  // llama-server's deepseek-legacy streaming: reasoning stays in `content`
  // wrapped in its tags. Callers set it for kDeepSeekLegacy when streaming.
  bool reasoning_in_content = false;
  // ToolCallGrammar lets an optional reasoning block precede the call (a
  // forced-open one is always allowed). Servers clear it for templates
  // that do not think, so a forced call cannot wander into free text.
  bool allow_reasoning = true;
  // The request's OpenAI `tools`, so an XML-style argument that the tool's
  // schema types as a string stays the text the model wrote ("42", "{...}")
  // instead of a guessed JSON value. Null: values are guessed.
  std::shared_ptr<const nlohmann::ordered_json> tools;
};

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
  std::string id;         // empty unless the format carries one
  // XML-style formats write argument values as bare text, so whether "42"
  // is a number or a string is the tool schema's call: the raw text of each
  // value whose type was guessed, by argument name (see ChatSyntax::tools).
  // Used while parsing; always empty in ParseChatOutput's result.
  std::vector<std::pair<std::string, std::string>> raw_arguments = {};
  friend bool operator==(const ToolCall&, const ToolCall&) = default;
};

struct ChatMessage {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  friend bool operator==(const ChatMessage&, const ChatMessage&) = default;
};

// Returns the stable lower-case name of `f`, e.g. "hermes".
const char* ToolCallFormatName(ToolCallFormat f);

// Returns the format whose name is `name` (as ToolCallFormatName), or
// InvalidArgument listing the known names.
StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name);

// Parses a --reasoning-format value: "none", "deepseek", "deepseek-legacy"
// or "auto"; anything else is InvalidArgument naming it and those values.
StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_CHAT_SYNTAX_H_
