#include "chat/grammar_util.h"

#include <cctype>
#include <cstdio>

#include "grammar/json_schema_to_gbnf.h"

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;

bool IsToolNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

// Checks one entry of `tools` and extracts its name and schema.
StatusOr<ToolSpec> ReadTool(const Json& tool, size_t index) {
  std::string where = "tools[" + std::to_string(index) + "]";
  if (!tool.is_object())
    return InvalidArgumentError(where + " is not an object");
  if (tool.contains("type") && tool["type"] != "function") {
    return InvalidArgumentError(where + ": type " + tool["type"].dump() +
                                " is not supported (only \"function\")");
  }
  const Json* fn = tool.contains("function") ? &tool["function"] : &tool;
  if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
    return InvalidArgumentError(where + " has no function name");
  }
  ToolSpec spec;
  spec.name = (*fn)["name"].get<std::string>();
  for (char c : spec.name) {
    if (!IsToolNameChar(c)) spec.name.clear();
  }
  if (spec.name.empty()) {
    return InvalidArgumentError(where + ": function name " +
                                (*fn)["name"].dump() +
                                " must be letters, digits, '_', '-', '.'");
  }
  spec.parameters = fn->value("parameters", Json::object());
  if (!spec.parameters.is_object()) {
    return InvalidArgumentError("tool '" + spec.name +
                                "': parameters must be a JSON schema object");
  }
  if (spec.parameters.empty()) spec.parameters = {{"type", "object"}};
  return spec;
}

// The name a tool_choice object asks for, or "" when it is a string.
StatusOr<std::string> ChoiceName(const Json& choice) {
  if (choice.is_string()) return std::string();
  if (choice.is_object() && choice.contains("function") &&
      choice["function"].is_object() &&
      choice["function"].value("name", Json()).is_string()) {
    return choice["function"]["name"].get<std::string>();
  }
  return InvalidArgumentError("tool_choice " + choice.dump() +
                              " is not \"auto\", \"required\", \"none\" or "
                              "{\"type\":\"function\",\"function\":"
                              "{\"name\":..}}");
}

}  // namespace

StatusOr<std::vector<ToolSpec>> SelectTools(const Json& tools,
                                            const Json& tool_choice,
                                            bool allow_auto) {
  if (!tools.is_array() || tools.empty()) {
    return InvalidArgumentError("tools must be a non-empty array");
  }
  KV_ASSIGN_OR_RETURN(std::string wanted, ChoiceName(tool_choice));
  if (wanted.empty()) {
    std::string c = tool_choice.get<std::string>();
    if (c != "required" && !(c == "auto" && allow_auto)) {
      return InvalidArgumentError("tool_choice \"" + c +
                                  "\" does not force a tool call");
    }
  }
  std::vector<ToolSpec> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    KV_ASSIGN_OR_RETURN(ToolSpec spec, ReadTool(tools[i], i));
    if (wanted.empty() || spec.name == wanted) out.push_back(std::move(spec));
  }
  if (out.empty()) {
    return InvalidArgumentError("tool_choice names function '" + wanted +
                                "', which is not among tools");
  }
  return out;
}

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string PrefixRules(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  size_t i = 0;
  auto copy_until = [&](char close) {  // a literal, class or count
    out += gbnf[i++];
    while (i < gbnf.size() && gbnf[i] != close) {
      if (gbnf[i] == '\\' && i + 1 < gbnf.size()) out += gbnf[i++];
      out += gbnf[i++];
    }
    if (i < gbnf.size()) out += gbnf[i++];
  };
  while (i < gbnf.size()) {
    char c = gbnf[i];
    if (c == '"') {
      copy_until('"');
      continue;
    }
    if (c == '[') {
      copy_until(']');
      continue;
    }
    if (c == '{') {
      copy_until('}');
      continue;
    }
    if (c == '#') {
      copy_until('\n');
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      out += prefix;
      while (i < gbnf.size() &&
             (std::isalnum(static_cast<unsigned char>(gbnf[i])) ||
              gbnf[i] == '-' || gbnf[i] == '_')) {
        out += gbnf[i++];
      }
      continue;
    }
    out += gbnf[i++];
  }
  return out;
}

StatusOr<std::string> SchemaRules(const Json& schema, const std::string& name,
                                  std::string_view tool) {
  StatusOr<std::string> g = JsonSchemaToGbnf(schema);
  if (!g.ok()) {
    return InvalidArgumentError(
        "tool '" + std::string(tool) +
        "': parameters: " + std::string(g.status().message()));
  }
  // The converter's start rule is "root": after prefixing it is
  // `name`-root, so alias it to `name`.
  std::string prefix = name + "-";
  return name + " ::= " + prefix + "root\n" + PrefixRules(*g, prefix);
}

StatusOr<std::vector<ParamSpec>> ParamRules(const ToolSpec& tool,
                                            const std::string& prefix,
                                            std::string_view raw_text_rule,
                                            std::string* rules) {
  std::vector<ParamSpec> out;
  const Json& props = tool.parameters.value("properties", Json::object());
  Json required = tool.parameters.value("required", Json::array());
  for (auto it = props.begin(); it != props.end(); ++it) {
    ParamSpec p;
    p.name = it.key();
    p.rule = prefix + "-p" + std::to_string(out.size());
    for (const auto& r : required) p.required |= (r == p.name);
    const Json& s = it.value();
    if (s.is_object() && s.value("type", Json()) == "string") {
      p.raw_string = true;
      std::string alts;
      for (const auto& e : s.value("enum", Json::array())) {
        if (!e.is_string()) continue;
        alts += (alts.empty() ? "" : " | ") + GbnfLiteral(e.get<std::string>());
      }
      *rules += p.rule +
                " ::= " + (alts.empty() ? std::string(raw_text_rule) : alts) +
                "\n";
    } else {
      KV_ASSIGN_OR_RETURN(std::string r, SchemaRules(s, p.rule, tool.name));
      *rules += r;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kvault::chat
