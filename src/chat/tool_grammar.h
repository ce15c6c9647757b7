// Grammars (GBNF text for src/grammar) that force a model to call a tool in
// its own syntax, and llama-server's "generic" JSON tool protocol for
// templates that do not describe tools themselves.
#ifndef KVAULT_CHAT_TOOL_GRAMMAR_H_
#define KVAULT_CHAT_TOOL_GRAMMAR_H_

#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_syntax.h"
#include "core/status_or.h"

namespace kvault::chat {

// Returns a grammar (start rule "root") whose sentences are calls in
// `syntax.format`'s syntax to the tools `tool_choice` allows ("required":
// any of `tools`; {"type":"function","function":{"name":N}}: N), with
// arguments matching each tool's "parameters" schema; `parallel` allows
// several calls. A reasoning block may come first (it must when
// `syntax.thinking_forced_open`). InvalidArgument naming the tool and the
// problem for bad tools; for kContentOnly; for "auto"/"none" (except
// kGeneric, whose grammar allows a plain reply for "auto").
StatusOr<std::string> ToolCallGrammar(const ChatSyntax& syntax,
                                      const nlohmann::ordered_json& tools,
                                      const nlohmann::ordered_json& tool_choice,
                                      bool parallel);

// Returns system-prompt text that lists `tools` and tells the model to reply
// with {"tool_call": ..}, {"tool_calls": [..]} (when `parallel`) or
// {"response": ".."}.
std::string GenericToolSystemPrompt(const nlohmann::ordered_json& tools,
                                    bool parallel);

// Returns the grammar for that reply shape; {"response": ..} is allowed
// only for tool_choice "auto". Errors as ToolCallGrammar.
StatusOr<std::string> GenericToolGrammar(
    const nlohmann::ordered_json& tools,
    const nlohmann::ordered_json& tool_choice, bool parallel);

}  // namespace kvault::chat

#endif  // KVAULT_CHAT_TOOL_GRAMMAR_H_
