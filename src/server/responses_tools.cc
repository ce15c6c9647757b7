#include "server/responses_tools.h"

#include <string>

#include "server/json_fields.h"
#include "server/responses_codec.h"

namespace kvault {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

Status Invalid(const std::string& field, const std::string& what) {
  return InvalidArgumentError("field '" + field + "': " + what)
      .WithReason(kReasonInvalidTools);
}

// The string at `key` of the object `obj`, `fallback` when absent; an error
// naming `where`.`key` for another type (nlohmann's value() would throw).
StatusOr<std::string> Str(const ordered_json& obj, const char* key,
                          const std::string& where,
                          const std::string& fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    return Invalid((where.empty() ? "" : where + ".") + key,
                   "expected a string");
  }
  return it->get<std::string>();
}

StatusOr<ordered_json> ChatTools(const ordered_json& tools) {
  if (!tools.is_array()) return Invalid("tools", "expected an array");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || t["type"] != "function") {
      return UnsupportedField(where + ".type",
                              "only \"function\" tools (kvault runs no "
                              "built-in or hosted tools)");
    }
    if (!t.contains("name") || !t["name"].is_string()) {
      return Invalid(where + ".name", "expected a string");
    }
    ordered_json fn = ordered_json::object();
    fn["name"] = t["name"];
    if (t.contains("description")) fn["description"] = t["description"];
    if (t.contains("parameters")) fn["parameters"] = t["parameters"];
    if (t.contains("strict")) fn["strict"] = t["strict"];
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "name"}.
StatusOr<ordered_json> ChatToolChoice(const ordered_json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.contains("type") &&
      choice["type"] == "function" && choice.contains("name")) {
    return ordered_json{{"type", "function"},
                        {"function", {{"name", choice["name"]}}}};
  }
  return Invalid("tool_choice",
                 "expected \"auto\", \"none\", \"required\" or "
                 "{\"type\": \"function\", \"name\": ...}");
}

// The text of an item's content or output, as a message item's is read.
StatusOr<std::string> ItemText(const ordered_json& content,
                               const std::string& where) {
  return ResponsesItemText(json::parse(content.dump()), where);
}

// Appends one input item to the chat messages.
Status AddItem(const ordered_json& item, const std::string& where,
               ordered_json* messages) {
  if (!item.is_object()) return Invalid(where, "expected an item object");
  KV_ASSIGN_OR_RETURN(std::string type, Str(item, "type", where, "message"));
  KV_ASSIGN_OR_RETURN(std::string call_id, Str(item, "call_id", where, ""));
  if (type == "function_call") {
    KV_ASSIGN_OR_RETURN(std::string name, Str(item, "name", where, ""));
    KV_ASSIGN_OR_RETURN(std::string args, Str(item, "arguments", where, "{}"));
    ordered_json call{{"id", call_id},
                      {"type", "function"},
                      {"function", {{"name", name}, {"arguments", args}}}};
    if (messages->empty() || messages->back().value("role", "") != "assistant" ||
        !messages->back().contains("tool_calls")) {
      messages->push_back({{"role", "assistant"},
                           {"content", nullptr},
                           {"tool_calls", ordered_json::array()}});
    }
    messages->back()["tool_calls"].push_back(std::move(call));
    return Status::Ok();
  }
  if (type == "function_call_output") {
    auto out = item.find("output");
    KV_ASSIGN_OR_RETURN(std::string output,
                        ItemText(out == item.end() ? ordered_json("") : *out,
                                  where + ".output"));
    messages->push_back({{"role", "tool"},
                         {"tool_call_id", call_id},
                         {"content", output}});
    return Status::Ok();
  }
  if (type != "message") {
    return InvalidArgumentError("field '" + where + ".type': \"" + type +
                                "\" items are not supported (supported: "
                                "message, function_call, "
                                "function_call_output)")
        .WithReason(kReasonUnsupportedContent);
  }
  KV_ASSIGN_OR_RETURN(std::string role, Str(item, "role", where, "user"));
  if (role == "developer") role = "system";
  auto content = item.find("content");
  KV_ASSIGN_OR_RETURN(
      std::string text,
      ItemText(content == item.end() ? ordered_json("") : *content,
                where + ".content"));
  messages->push_back({{"role", role}, {"content", text}});
  return Status::Ok();
}

StatusOr<ordered_json> ChatMessages(const ordered_json& body) {
  ordered_json messages = ordered_json::array();
  KV_ASSIGN_OR_RETURN(std::string instructions,
                      Str(body, "instructions", "", ""));
  if (!instructions.empty()) {
    messages.push_back({{"role", "system"}, {"content", instructions}});
  }
  auto it = body.find("input");
  const ordered_json input = it == body.end() ? ordered_json() : *it;
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array() || input.empty()) {
    return Invalid("input", "expected a string or a non-empty array of items");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    KV_RETURN_IF_ERROR(
        AddItem(input[i], "input[" + std::to_string(i) + "]", &messages));
  }
  return messages;
}

bool IsToolItem(const json& item) {
  if (!item.is_object() || !item.contains("type")) return false;
  return item["type"] == "function_call" ||
         item["type"] == "function_call_output";
}

}  // namespace

bool ResponsesUsesTools(const json& body) {
  const json* tools = FindField(body, "tools");
  if (tools != nullptr && tools->is_array() && !tools->empty()) return true;
  const json* input = FindField(body, "input");
  if (input == nullptr || !input->is_array()) return false;
  for (const json& item : *input) {
    if (IsToolItem(item)) return true;
  }
  return false;
}

StatusOr<ordered_json> ResponsesToChatBody(const ordered_json& body) {
  static const char* const kResponsesOnly[] = {
      "input", "instructions", "tools", "tool_choice", "max_output_tokens",
      "text", "metadata", "truncation", "store", "include", "background"};
  ordered_json chat = body;
  for (const char* key : kResponsesOnly) chat.erase(key);
  KV_ASSIGN_OR_RETURN(chat["messages"], ChatMessages(body));
  if (body.contains("tools") && !body["tools"].is_null()) {
    KV_ASSIGN_OR_RETURN(chat["tools"], ChatTools(body["tools"]));
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    KV_ASSIGN_OR_RETURN(chat["tool_choice"],
                        ChatToolChoice(body["tool_choice"]));
  }
  if (!chat.contains("n_predict") && body.contains("max_output_tokens")) {
    chat["n_predict"] = body["max_output_tokens"];
  }
  return chat;
}

}  // namespace kvault
