// llama-server's generic tool protocol: the reply is one JSON object.
#include <string>

#include "chat/grammar_util.h"
#include "chat/tool_grammar.h"

namespace kvault::chat {

using Json = nlohmann::ordered_json;

std::string GenericToolSystemPrompt(const Json& tools, bool parallel) {
  std::string p =
      "You can use the tools listed below. Reply with one JSON object and "
      "nothing else.\n"
      "To call a tool: {\"tool_call\": {\"name\": \"<tool name>\", "
      "\"arguments\": {<arguments as its schema describes>}}}\n";
  if (parallel) {
    p += "To call several tools at once: {\"tool_calls\": [{\"name\": "
         "\"<tool name>\", \"arguments\": {...}}, ...]}\n";
  }
  p += "To answer without a tool: {\"response\": \"<your answer>\"}\n\n"
       "Tools:\n";
  p += tools.dump(2, ' ', false, Json::error_handler_t::replace);
  return p;
}

StatusOr<std::string> GenericToolGrammar(const Json& tools,
                                         const Json& tool_choice,
                                         bool parallel) {
  KV_ASSIGN_OR_RETURN(auto specs, SelectTools(tools, tool_choice,
                                              /*allow_auto=*/true));
  std::string g =
      "cws ::= [ \\t\\n]{0,4}\n"
      "resp-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | "
      "\"u\" [0-9a-fA-F]{4})\n";
  std::string call = "call ::= ";
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string args = "args" + std::to_string(i);
    KV_ASSIGN_OR_RETURN(std::string r,
                        SchemaRules(specs[i].parameters, args, specs[i].name));
    g += r;
    call += (i ? " | " : "") +
            std::string("\"{\" cws \"\\\"name\\\"\" cws \":\" cws ") +
            GbnfLiteral("\"" + specs[i].name + "\"") +
            " cws \",\" cws \"\\\"arguments\\\"\" cws \":\" cws " + args +
            " cws \"}\"";
  }
  g += call + "\n";
  std::string root =
      "root ::= \"{\" cws (\"\\\"tool_call\\\"\" cws \":\" cws call";
  if (parallel) {
    root +=
        " | \"\\\"tool_calls\\\"\" cws \":\" cws \"[\" cws call "
        "(cws \",\" cws call)* cws \"]\"";
  }
  if (tool_choice.is_string() && tool_choice == "auto") {
    root +=
        " | \"\\\"response\\\"\" cws \":\" cws \"\\\"\" resp-char* \"\\\"\"";
  }
  return g + root + ") cws \"}\"\n";
}

}  // namespace kvault::chat
