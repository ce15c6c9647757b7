// /v1/messages requests: the body -> chat messages -> CompletionRequest.
#include "server/anthropic_codec.h"

#include "server/http_error.h"
#include "server/json_fields.h"
#include "server/openai_codec.h"

namespace kvault {
namespace {

using nlohmann::json;

// Anthropic fields kvault cannot honour: refused rather than ignored.
Status RefuseUnsupportedFields(const json& body) {
  static const char* const kRefused[][2] = {
      {"container", "kvault runs no code-execution containers"},
      {"mcp_servers", "kvault connects to no MCP servers"},
      {"context_management", "kvault does not edit the context"},
  };
  for (const auto& [field, why] : kRefused) {
    if (FindField(body, field) != nullptr) return UnsupportedField(field, why);
  }
  return Status::Ok();
}

// Reads block `b` ("<name>") as {type: "text", text: string}.
StatusOr<std::string> TextBlock(const json& b, const std::string& name) {
  const json* t = FindField(b, "text");
  if (t == nullptr || !t->is_string()) {
    return WrongType(name + ".text", "a string",
                     t == nullptr ? json(nullptr) : *t);
  }
  return t->get<std::string>();
}

// Returns the type of content block `b`, checking it is an object.
StatusOr<std::string> BlockType(const json& b, const std::string& name) {
  if (!b.is_object()) return WrongType(name, "a content block object", b);
  std::string type;
  KV_RETURN_IF_ERROR(ReadString(b, "type", &type));
  if (type.empty()) {
    return InvalidArgumentError("field '" + name + ".type' is required")
        .WithReason(kReasonMissingField);
  }
  return type;
}

Status UnsupportedBlock(const std::string& name, const std::string& type,
                        const char* supported) {
  return InvalidArgumentError("field '" + name + ".type': \"" + type +
                              "\" blocks are not supported here (supported: " +
                              supported + ")")
      .WithReason(kReasonUnsupportedContent);
}

// Returns a string or an array of text blocks joined with "\n" (system
// prompts, tool_result contents); image blocks are llama-server's 500.
StatusOr<std::string> TextOrBlocks(const json& v, const std::string& name) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) {
    return WrongType(name, "a string or an array of content blocks", v);
  }
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string bname = name + "[" + std::to_string(i) + "]";
    KV_ASSIGN_OR_RETURN(std::string type, BlockType(v[i], bname));
    if (type == "image") return ImageNotSupportedError();
    if (type != "text") return UnsupportedBlock(bname, type, "text, image");
    KV_ASSIGN_OR_RETURN(std::string text, TextBlock(v[i], bname));
    if (!out.empty()) out += "\n";
    out += text;
  }
  return out;
}

// {"tool_call": {"name": N, "input": I}}: how tool calls are spelled both in
// the rendered history and in the model's answer.
std::string ToolCallText(const json& name, const json& input) {
  return DumpJson(json{{"tool_call", {{"name", name}, {"input", input}}}});
}

StatusOr<std::string> ToolUseBlockText(const json& b, const std::string& n) {
  std::string name;
  KV_RETURN_IF_ERROR(ReadString(b, "name", &name));
  const json* input = FindField(b, "input");
  if (input != nullptr && !input->is_object()) {
    return WrongType(n + ".input", "an object", *input);
  }
  return ToolCallText(name, input == nullptr ? json::object() : *input);
}

StatusOr<std::string> ToolResultBlockText(const json& b,
                                          const std::string& n) {
  std::string id;
  bool is_error = false;
  KV_RETURN_IF_ERROR(ReadString(b, "tool_use_id", &id));
  KV_RETURN_IF_ERROR(ReadBool(b, "is_error", &is_error));
  std::string content;
  if (const json* c = FindField(b, "content")) {
    KV_ASSIGN_OR_RETURN(content, TextOrBlocks(*c, n + ".content"));
  }
  return std::string(is_error ? "Tool error" : "Tool result") + " (" + id +
         "): " + content;
}

// Returns the text block `b` of a message with `role` contributes ("" for
// thinking blocks: the built-in templates have no place for reasoning).
StatusOr<std::string> MessageBlockText(const json& b, const std::string& name,
                                       const std::string& role) {
  KV_ASSIGN_OR_RETURN(std::string type, BlockType(b, name));
  if (type == "text") return TextBlock(b, name);
  if (type == "image") return ImageNotSupportedError();
  if (role == "assistant") {
    if (type == "tool_use") return ToolUseBlockText(b, name);
    if (type == "thinking" || type == "redacted_thinking") return std::string();
    return UnsupportedBlock(name, type,
                            "text, tool_use, thinking, redacted_thinking");
  }
  if (type == "tool_result") return ToolResultBlockText(b, name);
  return UnsupportedBlock(name, type, "text, image, tool_result");
}

StatusOr<ChatMessage> ParseMessage(const json& m, const std::string& name) {
  if (!m.is_object()) return WrongType(name, "a message object", m);
  ChatMessage msg;
  KV_RETURN_IF_ERROR(ReadString(m, "role", &msg.role));
  if (msg.role != "user" && msg.role != "assistant") {
    return InvalidArgumentError("field '" + name +
                                ".role': expected \"user\" or \"assistant\", "
                                "got \"" +
                                msg.role + "\"")
        .WithReason(kReasonUnknownRole);
  }
  const json* content = FindField(m, "content");
  if (content == nullptr) {
    return InvalidArgumentError("field '" + name + ".content' is required")
        .WithReason(kReasonMissingField);
  }
  if (content->is_string()) {
    msg.content = content->get<std::string>();
    return msg;
  }
  if (!content->is_array()) {
    return WrongType(name + ".content",
                     "a string or an array of content blocks", *content);
  }
  for (size_t i = 0; i < content->size(); ++i) {
    KV_ASSIGN_OR_RETURN(std::string text,
                        MessageBlockText((*content)[i],
                                         name + ".content[" +
                                             std::to_string(i) + "]",
                                         msg.role));
    if (text.empty()) continue;
    if (!msg.content.empty()) msg.content += "\n";
    msg.content += text;
  }
  return msg;
}

// Reads tool_choice: "auto" (default) or "none"; "any" and "tool" would
// need a forced tool call, which kvault cannot constrain the model to.
StatusOr<bool> ToolsEnabled(const json& body) {
  const json* choice = FindField(body, "tool_choice");
  if (choice == nullptr) return true;
  if (!choice->is_object()) {
    return WrongType("tool_choice", "an object {\"type\": ...}", *choice);
  }
  std::string type;
  KV_RETURN_IF_ERROR(ReadString(*choice, "type", &type));
  if (type == "auto" || type.empty()) return true;
  if (type == "none") return false;
  return InvalidArgumentError(
             "field 'tool_choice.type': \"" + type +
             "\" is not supported (kvault cannot force a tool call); "
             "supported: auto, none")
      .WithReason(kReasonUnsupportedField);
}

// Returns the system-turn text describing `tools`; fills `names`.
StatusOr<std::string> ToolsPrompt(const json& tools,
                                  std::vector<std::string>* names) {
  if (!tools.is_array()) return WrongType("tools", "an array of tools", tools);
  std::string list;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string name = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) return WrongType(name, "a tool object", t);
    std::string type, tool_name, description;
    KV_RETURN_IF_ERROR(ReadString(t, "type", &type));
    if (!type.empty() && type != "custom") {
      return UnsupportedField(name + ".type", "\"" + type +
                                             "\" is a server tool; kvault "
                                             "runs only client tools");
    }
    KV_RETURN_IF_ERROR(ReadString(t, "name", &tool_name));
    KV_RETURN_IF_ERROR(ReadString(t, "description", &description));
    const json* schema = FindField(t, "input_schema");
    if (tool_name.empty() || schema == nullptr || !schema->is_object()) {
      return WrongType(name, "{name: string, input_schema: object}", t);
    }
    names->push_back(tool_name);
    list += DumpJson(json{{"name", tool_name},
                          {"description", description},
                          {"input_schema", *schema}}) +
            "\n";
  }
  return "You may call these tools. To call one, reply with only " +
         ToolCallText("TOOL_NAME", json{{"ARGUMENT", "VALUE"}}) +
         " and nothing else.\nTools:\n" + list;
}

// Returns the system text: `system` and, when enabled, the tools.
StatusOr<std::string> SystemText(const json& body,
                                 std::vector<std::string>* tool_names) {
  std::string system;
  if (const json* s = FindField(body, "system")) {
    KV_ASSIGN_OR_RETURN(system, TextOrBlocks(*s, "system"));
  }
  KV_ASSIGN_OR_RETURN(bool tools_enabled, ToolsEnabled(body));
  const json* tools = FindField(body, "tools");
  if (tools == nullptr || !tools_enabled) return system;
  KV_ASSIGN_OR_RETURN(std::string prompt, ToolsPrompt(*tools, tool_names));
  if (tools->empty()) return system;
  return system.empty() ? prompt : system + "\n\n" + prompt;
}

// Checks thinking: {type: "enabled", budget_tokens} or {type: "disabled"}.
// Accepted either way: the built-in templates have no reasoning section, so
// the model answers without a thinking block (as llama-server with them).
Status CheckThinking(const json& body) {
  const json* t = FindField(body, "thinking");
  if (t == nullptr) return Status::Ok();
  if (!t->is_object()) return WrongType("thinking", "an object", *t);
  std::string type;
  int64_t budget = 0;
  KV_RETURN_IF_ERROR(ReadString(*t, "type", &type));
  KV_RETURN_IF_ERROR(ReadInt(*t, "budget_tokens", 0, 1ll << 31, &budget));
  if (type != "enabled" && type != "disabled" && type != "adaptive") {
    return InvalidArgumentError(
               "field 'thinking.type': expected \"enabled\", \"disabled\" or "
               "\"adaptive\", got \"" +
               type + "\"")
        .WithReason(kReasonInvalidField);
  }
  return Status::Ok();
}

}  // namespace

Status ImageNotSupportedError() {
  return InternalError(kImageNotSupported).WithReason(kReasonImageNotSupported);
}

StatusOr<std::vector<ChatMessage>> AnthropicChatMessages(
    const json& body, std::vector<std::string>* tool_names) {
  KV_RETURN_IF_ERROR(RefuseUnsupportedFields(body));
  const json* messages = FindField(body, "messages");
  if (messages == nullptr) {
    return InvalidArgumentError("field 'messages' is required")
        .WithReason(kReasonMissingField);
  }
  if (!messages->is_array()) {
    return WrongType("messages", "an array of messages", *messages);
  }
  std::vector<ChatMessage> out;
  KV_ASSIGN_OR_RETURN(std::string system, SystemText(body, tool_names));
  if (!system.empty()) out.push_back({"system", std::move(system)});
  for (size_t i = 0; i < messages->size(); ++i) {
    KV_ASSIGN_OR_RETURN(ChatMessage m, ParseMessage((*messages)[i],
                                                    "messages[" +
                                                        std::to_string(i) +
                                                        "]"));
    out.push_back(std::move(m));
  }
  // llama-server accepts an empty conversation; the templates need a turn.
  if (messages->empty()) out.push_back({"user", ""});
  return out;
}

StatusOr<AnthropicRequest> ParseAnthropicRequest(
    const json& body, const Tokenizer& tokenizer,
    const CompletionLimits& limits, const ChatFormat& format) {
  json fields = body;
  // Anthropic's tools and tool_choice are this codec's own (a system turn
  // describing them, tool_use blocks parsed back), not OpenAI's.
  fields.erase("tools");
  fields.erase("tool_choice");
  KV_RETURN_IF_ERROR(LowerTokenLimit(body, {"max_tokens"}, 1, &fields));
  AnthropicRequest out;
  if (const json* stops = FindField(body, "stop_sequences")) {
    if (!stops->is_array()) {
      return WrongType("stop_sequences", "an array of strings", *stops);
    }
    for (size_t i = 0; i < stops->size(); ++i) {
      if (!(*stops)[i].is_string()) {
        return WrongType("stop_sequences[" + std::to_string(i) + "]",
                         "a string", (*stops)[i]);
      }
      out.stop_sequences.push_back((*stops)[i].get<std::string>());
    }
    fields["stop"] = out.stop_sequences;
  }
  if (const json* m = FindField(body, "metadata"); m && !m->is_object()) {
    return WrongType("metadata", "an object", *m);
  }
  KV_RETURN_IF_ERROR(CheckThinking(body));
  KV_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages,
                      AnthropicChatMessages(body, &out.tool_names));
  KV_ASSIGN_OR_RETURN(out.completion, BuildChatRequest(fields, messages,
                                                       tokenizer, limits,
                                                       format));
  return out;
}

StatusOr<json> AnthropicCountTokens(const json& body,
                                    const Tokenizer& tokenizer,
                                    const ChatFormat& format) {
  std::vector<std::string> tool_names;
  KV_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages,
                      AnthropicChatMessages(body, &tool_names));
  KV_ASSIGN_OR_RETURN(std::vector<TokenId> tokens,
                      TokenizeChat(messages, tokenizer, format));
  return json{{"input_tokens", tokens.size()}};
}

}  // namespace kvault
