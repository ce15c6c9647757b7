// Building blocks for the tool-call grammars: validating `tools` and
// `tool_choice`, per-tool argument rules, and GBNF text helpers.
#ifndef KVAULT_CHAT_GRAMMAR_UTIL_H_
#define KVAULT_CHAT_GRAMMAR_UTIL_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault::chat {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema (an object)
};

// Returns the tools a grammar must allow: all of `tools` for "required"
// (and for "auto" when `allow_auto`), the named one for {"type":"function",
// "function":{"name":..}}. InvalidArgument naming the tool and the problem
// for malformed tools, an unknown name, or a tool_choice that forces
// nothing.
StatusOr<std::vector<ToolSpec>> SelectTools(
    const nlohmann::ordered_json& tools,
    const nlohmann::ordered_json& tool_choice, bool allow_auto);

// Returns `text` as a GBNF string literal, quotes included.
std::string GbnfLiteral(std::string_view text);

// Returns GBNF `gbnf` with every rule name prefixed by `prefix`.
std::string PrefixRules(std::string_view gbnf, std::string_view prefix);

// Returns rules for the JSON value `schema` describes, with start rule
// `name` (rules named `name`-...). InvalidArgument naming the tool.
StatusOr<std::string> SchemaRules(const nlohmann::ordered_json& schema,
                                  const std::string& name,
                                  std::string_view tool);

// One argument of a tool, for the formats that write each argument as its
// own element.
struct ParamSpec {
  std::string name;
  bool required = false;
  bool raw_string = false;  // written as raw text, not JSON
  std::string rule;         // the rule for its value
};

// Adds to *rules the value rules for each property of `tool`'s parameters,
// named `prefix`-p<i>; string values become raw text (`raw_text_rule`), or
// an alternation of an enum's values.
StatusOr<std::vector<ParamSpec>> ParamRules(const ToolSpec& tool,
                                            const std::string& prefix,
                                            std::string_view raw_text_rule,
                                            std::string* rules);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_GRAMMAR_UTIL_H_
