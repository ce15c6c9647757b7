#include "server/chat_tools.h"

#include <memory>
#include <string_view>

#include "chat/tool_grammar.h"
#include "server/chat_format.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The ordered copy of a field when there is one (keys in the client's
// order), else the field converted; null when absent or null.
std::optional<ordered_json> Field(const json& body, const ordered_json* ordered,
                                  const char* key) {
  if (ordered != nullptr && ordered->is_object()) {
    auto it = ordered->find(key);
    if (it == ordered->end() || it->is_null()) return std::nullopt;
    return *it;
  }
  const json* v = FindField(body, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return ordered_json::parse(v->dump());
}

// Checks `tools` is an array of {"type":"function","function":{"name":..}}.
Status CheckTools(const ordered_json& tools) {
  if (!tools.is_array()) {
    return WrongType("tools", "an array of tools", json::parse(tools.dump()));
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function") {
      return InvalidArgumentError("field '" + where +
                                  "': expected {\"type\": \"function\", ...}")
          .WithReason(kReasonInvalidTools);
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object() || !fn->contains("name") ||
        !(*fn)["name"].is_string()) {
      return InvalidArgumentError("field '" + where +
                                  ".function.name': expected a string")
          .WithReason(kReasonInvalidTools);
    }
  }
  return Status::Ok();
}

// Reads tool_choice: "none", "auto", "required" or a named function.
StatusOr<ordered_json> ReadToolChoice(const json& body,
                                      const ordered_json* ordered) {
  std::optional<ordered_json> choice = Field(body, ordered, "tool_choice");
  if (!choice) return ordered_json("auto");
  if (choice->is_string()) {
    const std::string& s = choice->get_ref<const std::string&>();
    if (s == "none" || s == "auto" || s == "required") return *choice;
  } else if (choice->is_object() && choice->value("type", "") == "function" &&
             choice->contains("function") &&
             (*choice)["function"].is_object() &&
             (*choice)["function"].value("name", "") != "") {
    return *choice;
  }
  return InvalidArgumentError(
             "field 'tool_choice': expected \"none\", \"auto\", \"required\" "
             "or {\"type\": \"function\", \"function\": {\"name\": ...}}, got " +
             choice->dump())
      .WithReason(kReasonInvalidTools);
}

StatusOr<bool> ReadBool(const json& body, const char* key, bool fallback) {
  const json* v = FindField(body, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
  return v->get<bool>();
}

// The reasoning format: the request's, else the server's.
StatusOr<chat::ReasoningFormat> ReadReasoningFormat(
    const json& body, const ChatOutputOptions& options) {
  const json* v = FindField(body, "reasoning_format");
  if (v == nullptr || v->is_null()) return options.reasoning_format;
  if (!v->is_string()) return WrongType("reasoning_format", "a string", *v);
  StatusOr<chat::ReasoningFormat> f =
      chat::ParseReasoningFormat(v->get<std::string>());
  if (!f.ok()) return f.status().WithContext("field 'reasoning_format'");
  return f;
}

// Template variables for reasoning: enable_thinking (--reasoning), and
// reasoning_effort (the request's, else --reasoning-effort).
Status AddReasoningVars(const json& body, const ChatOutputOptions& options,
                        ordered_json* vars) {
  if (options.enable_thinking) (*vars)["enable_thinking"] = *options.enable_thinking;
  std::string effort = options.reasoning_effort;
  if (const json* v = FindField(body, "reasoning_effort");
      v != nullptr && !v->is_null()) {
    if (!v->is_string()) return WrongType("reasoning_effort", "a string", *v);
    effort = v->get<std::string>();
  }
  if (!effort.empty() && effort != "default") {
    (*vars)["reasoning_effort"] = effort;
  }
  return Status::Ok();
}

// `strict: true` asks that a call's arguments match the schema exactly.
// A grammar enforces that when tool_choice forces a call, and always in
// the generic format; under "auto" the model may call freely, unchecked.
Status CheckStrict(const ordered_json& tools, const ordered_json& choice,
                   chat::ToolCallFormat format) {
  if (!(choice.is_string() && choice == "auto") ||
      format == chat::ToolCallFormat::kGeneric) {
    return Status::Ok();
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& fn = tools[i]["function"];
    auto strict = fn.find("strict");
    if (strict != fn.end() && strict->is_boolean() && strict->get<bool>()) {
      return UnsupportedField(
          "tools[" + std::to_string(i) + "].function.strict",
          "arguments are held to the schema only when tool_choice forces a "
          "call (\"required\" or a named tool)");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ToolGrammar(const ChatToolPlan& plan) {
  if (!plan.has_tools) return std::string();
  if (plan.syntax.format == chat::ToolCallFormat::kGeneric) {
    return chat::GenericToolGrammar(plan.tools, plan.tool_choice,
                                    plan.parallel);
  }
  if (plan.tool_choice.is_string() && plan.tool_choice == "auto") {
    return std::string();
  }
  return chat::ToolCallGrammar(plan.syntax, plan.tools, plan.tool_choice,
                               plan.parallel);
}

StatusOr<ChatToolPlan> PlanChatTools(const json& body,
                                     const ordered_json* ordered,
                                     const ChatFormat& format,
                                     const ChatOutputOptions& options) {
  ChatToolPlan plan;
  plan.parse = !options.skip_parsing;
  KV_ASSIGN_OR_RETURN(plan.syntax.reasoning_format,
                      ReadReasoningFormat(body, options));
  KV_RETURN_IF_ERROR(AddReasoningVars(body, options, &plan.vars));
  std::optional<ordered_json> tools = Field(body, ordered, "tools");
  KV_ASSIGN_OR_RETURN(ordered_json choice, ReadToolChoice(body, ordered));
  KV_ASSIGN_OR_RETURN(bool parallel,
                      ReadBool(body, "parallel_tool_calls", false));
  KV_ASSIGN_OR_RETURN(plan.syntax.parse_tool_calls,
                      ReadBool(body, "parse_tool_calls", true));
  if (tools) KV_RETURN_IF_ERROR(CheckTools(*tools));
  const bool want_tools = tools && !tools->empty() && choice != "none";
  if (!want_tools) {
    if (!choice.is_string() || choice == "required") {
      return InvalidArgumentError(
                 "field 'tool_choice': " + choice.dump() +
                 " needs a non-empty 'tools' list")
          .WithReason(kReasonInvalidTools);
    }
    plan.syntax.parse_tool_calls = false;
    return plan;
  }
  if (!format.is_jinja()) {
    return UnsupportedField(
        "tools", "tool calls need a Jinja chat template (drop --no-jinja, or "
                 "give --chat-template a template, not a built-in name)");
  }
  KV_RETURN_IF_ERROR(CheckStrict(*tools, choice, format.tool_call_format()));
  plan.has_tools = true;
  plan.vars["tools"] = *tools;
  plan.tools = *tools;
  plan.tool_choice = choice;
  plan.parallel = parallel;
  plan.syntax.format = format.tool_call_format();
  plan.syntax.tools = std::make_shared<const ordered_json>(*tools);
  plan.syntax.allow_reasoning =
      plan.syntax.reasoning_format != chat::ReasoningFormat::kNone &&
      format.thinks();
  if (plan.syntax.format == chat::ToolCallFormat::kGeneric) {
    plan.system_prompt = chat::GenericToolSystemPrompt(*tools, parallel);
  }
  return plan;
}

ordered_json MessagesForTemplate(const ordered_json& messages,
                                 const std::string& system_prompt) {
  ordered_json out = messages;
  for (ordered_json& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") ||
        !m["tool_calls"].is_array()) {
      continue;
    }
    for (ordered_json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function")) continue;
      ordered_json& fn = call["function"];
      if (!fn.is_object() || !fn.contains("arguments") ||
          !fn["arguments"].is_string()) {
        continue;
      }
      ordered_json args = ordered_json::parse(
          fn["arguments"].get<std::string>(), nullptr, false);
      if (args.is_object()) fn["arguments"] = std::move(args);
    }
  }
  if (system_prompt.empty() || !out.is_array()) return out;
  if (!out.empty() && out[0].is_object() && out[0].value("role", "") == "system" &&
      out[0].contains("content") && out[0]["content"].is_string()) {
    out[0]["content"] =
        out[0]["content"].get<std::string>() + "\n\n" + system_prompt;
  } else {
    ordered_json system = ordered_json::object();
    system["role"] = "system";
    system["content"] = system_prompt;
    out.insert(out.begin(), std::move(system));
  }
  return out;
}

void NoteForcedThinking(const std::string& prompt, chat::ChatSyntax* syntax) {
  if (syntax->reasoning_format == chat::ReasoningFormat::kNone) return;
  size_t end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return;
  const std::string_view head(prompt.data(), end + 1);
  for (std::string_view open : {"<think>", "<seed:think>", "<thinking>"}) {
    if (head.size() >= open.size() &&
        head.substr(head.size() - open.size()) == open) {
      syntax->thinking_forced_open = true;
      return;
    }
  }
}

}  // namespace kvault
