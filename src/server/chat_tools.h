// Tools and reasoning on the chat route: what a request's `tools`,
// `tool_choice`, `parallel_tool_calls`, `parse_tool_calls`,
// `reasoning_format` and `reasoning_effort` (with the server's
// --reasoning-format, --reasoning, --reasoning-effort, --skip-chat-parsing)
// mean for the prompt (template variables, the generic format's system
// prompt), for sampling (the grammar that forces a call) and for reading
// the reply back (chat::ChatSyntax). The parsing itself is src/chat.
#ifndef KVAULT_SERVER_CHAT_TOOLS_H_
#define KVAULT_SERVER_CHAT_TOOLS_H_

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_syntax.h"
#include "core/status_or.h"

namespace kvault {

class ChatFormat;

// Server-wide settings, from the serve command line.
struct ChatOutputOptions {
  // --reasoning-format: where <think> text goes (llama-server's default).
  chat::ReasoningFormat reasoning_format = chat::ReasoningFormat::kAuto;
  // --reasoning on|off: the template's enable_thinking; unset: auto (the
  // template's own default).
  std::optional<bool> enable_thinking;
  // --reasoning-effort LEVEL: the template's reasoning_effort; "" keeps the
  // template's default.
  std::string reasoning_effort;
  // --skip-chat-parsing: the reply's text is returned as content, as is.
  bool skip_parsing = false;
  // --prefill-assistant (default on, as llama-server): a final assistant
  // message is the start of the reply, which continues it.
  bool prefill_assistant = true;
};

// What one chat request needs, from its body.
struct ChatToolPlan {
  chat::ChatSyntax syntax;  // how the reply is read back
  bool parse = true;        // false: the reply is content as generated
  bool has_tools = false;   // the template renders `tools`
  // Template variables to add (tools, enable_thinking, reasoning_effort).
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  // The generic format's description of the tools, merged into the system
  // message; "" otherwise.
  std::string system_prompt;
  // What ToolGrammar needs: the tools, tool_choice, parallel_tool_calls.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  nlohmann::ordered_json tool_choice = "auto";
  bool parallel = false;
};

// Reads the tool and reasoning fields of a chat body (`ordered`: the same
// body with its keys in the client's order, for the tools' schemas).
// InvalidArgument naming the field for a malformed value; tools with a
// built-in (non-Jinja) template are refused as llama-server refuses them.
StatusOr<ChatToolPlan> PlanChatTools(const nlohmann::json& body,
                                     const nlohmann::ordered_json* ordered,
                                     const ChatFormat& format,
                                     const ChatOutputOptions& options);

// Returns the messages as the template should see them: tool-call
// arguments given as JSON text become objects (templates index and tojson
// them), and `system_prompt` (when not empty) opens the system message.
nlohmann::ordered_json MessagesForTemplate(
    const nlohmann::ordered_json& messages, const std::string& system_prompt);

// Returns the GBNF that forces a tool call (tool_choice "required" or a
// named tool, or the generic format's reply shape), "" when sampling stays
// free. Call it after NoteForcedThinking: a forced-open prompt changes it.
StatusOr<std::string> ToolGrammar(const ChatToolPlan& plan);

// Sets syntax->thinking_forced_open when the rendered `prompt` ends inside
// an opened reasoning block (e.g. "...<think>\n").
void NoteForcedThinking(const std::string& prompt, chat::ChatSyntax* syntax);

}  // namespace kvault

#endif  // KVAULT_SERVER_CHAT_TOOLS_H_
