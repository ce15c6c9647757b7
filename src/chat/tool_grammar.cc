// Tool-call grammars per format. Each format contributes the expression for
// one call to one tool ("call-i") and the frame around one or more calls.
#include "chat/tool_grammar.h"

#include <string>
#include <vector>

#include "chat/grammar_util.h"
#include "chat/reasoning.h"

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;
using F = ToolCallFormat;

constexpr char kCommonRules[] =
    "cws ::= [ \\t\\n]{0,4}\n"
    // Raw argument text: anything without "</" (which would start a close
    // tag); a value that needs "</" cannot be forced, a known limit.
    "xml-text ::= ([^<] | \"<\" [^/])*\n"
    "call-id ::= [a-zA-Z0-9]{9}\n";

std::string Lit(std::string_view s) { return GbnfLiteral(s); }

// {"<name_key>": "N", "<args_key>": ARGS} with flexible spacing.
std::string JsonCall(const std::string& name, const std::string& args,
                     std::string_view name_key = "name",
                     std::string_view args_key = "arguments",
                     std::string_view first_field = "") {
  return "\"{\" cws " + std::string(first_field) +
         Lit("\"" + std::string(name_key) + "\"") + " cws \":\" cws " +
         Lit("\"" + name + "\"") + " cws \",\" cws " +
         Lit("\"" + std::string(args_key) + "\"") + " cws \":\" cws " + args +
         " cws \"}\"";
}

// One argument element per parameter, required ones mandatory.
StatusOr<std::string> XmlParams(const ToolSpec& tool, const std::string& rule,
                                F f, std::string* rules) {
  KV_ASSIGN_OR_RETURN(auto params, ParamRules(tool, rule, "xml-text", rules));
  std::string out;
  for (const ParamSpec& p : params) {
    std::string e;
    switch (f) {
      case F::kQwen3Coder:
        e = Lit("<parameter=" + p.name + ">\n") + " " + p.rule + " " +
            Lit("\n</parameter>\n");
        break;
      case F::kSeedOss:
        e = Lit("<parameter=" + p.name + ">") + " " + p.rule + " " +
            Lit("</parameter>\n");
        break;
      case F::kGlm45:
        e = Lit("<arg_key>" + p.name + "</arg_key>\n<arg_value>") + " " +
            p.rule + " " + Lit("</arg_value>\n");
        break;
      case F::kMiniMaxM2:
        e = Lit("<parameter name=\"" + p.name + "\">") + " " + p.rule + " " +
            Lit("</parameter>\n");
        break;
      default:  // kDeepSeekDsml
        e = Lit("<｜DSML｜parameter name=\"" + p.name + "\" string=\"" +
                (p.raw_string ? "true" : "false") + "\">") +
            " " + p.rule + " " + Lit("</｜DSML｜parameter>\n");
    }
    out += p.required ? " " + e : " (" + e + ")?";
  }
  return out.empty() ? std::string(" \"\"") : out;
}

// Returns the expression for one call to `tool` (rules named `rule`-...).
StatusOr<std::string> CallExpr(F f, const ToolSpec& tool,
                               const std::string& rule, std::string* rules) {
  const std::string& n = tool.name;
  if (f == F::kQwen3Coder || f == F::kSeedOss || f == F::kGlm45 ||
      f == F::kMiniMaxM2 || f == F::kDeepSeekDsml) {
    KV_ASSIGN_OR_RETURN(std::string ps, XmlParams(tool, rule, f, rules));
    if (f == F::kQwen3Coder) {
      return Lit("<tool_call>\n<function=" + n + ">\n") + ps +
             Lit("</function>\n</tool_call>");
    }
    if (f == F::kSeedOss) {
      return Lit("<seed:tool_call>\n<function=" + n + ">\n") + ps +
             Lit("</function>\n</seed:tool_call>");
    }
    if (f == F::kGlm45)
      return Lit("<tool_call>" + n + "\n") + ps + Lit("</tool_call>");
    if (f == F::kMiniMaxM2) {
      return Lit("<invoke name=\"" + n + "\">\n") + ps + Lit("</invoke>\n");
    }
    return Lit("<｜DSML｜invoke name=\"" + n + "\">\n") + ps +
           Lit("</｜DSML｜invoke>\n");
  }
  std::string args = rule + "-args";
  KV_ASSIGN_OR_RETURN(std::string r, SchemaRules(tool.parameters, args, n));
  *rules += r;
  switch (f) {
    case F::kHermes:
      return Lit("<tool_call>\n") + " " + JsonCall(n, args) + " " +
             Lit("\n</tool_call>");
    case F::kLlama3Json:
      return JsonCall(n, args, "name", "parameters");
    case F::kMistral:  // the Small 3.2 form; the Nemo form is in Frame()
      return Lit("[TOOL_CALLS]" + n) + " (\"[CALL_ID]\" call-id)? \"[ARGS]\" " +
             args;
    case F::kDeepSeekR1:
      return Lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n +
                 "\n```json\n") +
             " " + args + " " + Lit("\n```<｜tool▁call▁end｜>");
    case F::kDeepSeekV31:
      return Lit("<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>") + " " + args +
             " " + Lit("<｜tool▁call▁end｜>");
    case F::kKimiK2:
      return Lit("<|tool_call_begin|>functions." + n + ":") +
             " [0-9]{1,3} \"<|tool_call_argument_begin|>\" " + args +
             " \"<|tool_call_end|>\"";
    case F::kCommandR:
      // Command R numbers its calls first: "tool_call_id": "0".
      return JsonCall(
          n, args, "tool_name", "parameters",
          "\"\\\"tool_call_id\\\"\" cws \":\" cws \"\\\"\" [0-9]{1,3} "
          "\"\\\"\" cws \",\" cws ");
    case F::kGptOss:
      return Lit("<|channel|>commentary to=functions." + n +
                 " <|constrain|>json<|message|>") +
             " " + args + " \"<|call|>\"";
    case F::kFunctionaryV32:
      return Lit(n + "\n") + " " + args;
    default:  // kGranite, kApriel, and the Nemo list entries
      return JsonCall(n, args);
  }
}

// The frame around the calls ("call" alternates over the allowed tools).
std::string Frame(F f, bool parallel) {
  auto list = [&](std::string_view open, std::string_view close) {
    return Lit(open) + " cws call" +
           (parallel ? " (cws \",\" cws call)*" : "") + " cws " + Lit(close);
  };
  std::string more = parallel ? "+" : "";
  switch (f) {
    case F::kGranite:
      return list("<|tool_call|>[", "]");
    case F::kApriel:
      return list("<tool_calls>[", "]</tool_calls>");
    case F::kMistral:
      return "(" + list("[TOOL_CALLS][", "]") + ") | call-new" + more;
    case F::kCommandR:
      return "(" + list("<|START_ACTION|>[", "]<|END_ACTION|>") + ") | (" +
             list("Action:\n```json\n[", "]\n```") + ")";
    case F::kDeepSeekR1:
    case F::kDeepSeekV31:
      return "\"<｜tool▁calls▁begin｜>\" call" + more +
             " \"<｜tool▁calls▁end｜>\"";
    case F::kKimiK2:
      return "\"<|tool_calls_section_begin|>\" call" + more +
             " \"<|tool_calls_section_end|>\"";
    case F::kMiniMaxM2:
      return "\"<minimax:tool_call>\\n\" call" + more +
             " \"</minimax:tool_call>\"";
    case F::kDeepSeekDsml:
      return "\"<｜DSML｜tool_calls>\\n\" call" + more +
             " \"</｜DSML｜tool_calls>\"";
    case F::kLlama3Json:
      return parallel ? "call (cws \";\" cws call)*" : "call";
    case F::kFunctionaryV32:
      return parallel ? "call (cws \">>>\" call)*" : "call";
    case F::kGptOss:
      return "call";  // harmony ends the turn at <|call|>: one call
    default:
      return parallel ? "call (cws call)*" : "call";
  }
}

// An optional (or, when forced open, mandatory) reasoning block first.
std::string ReasoningPrefix(const ChatSyntax& syntax) {
  if (syntax.format == F::kGptOss) {
    return "(\"<|channel|>analysis<|message|>\" ([^<] | \"<\" [^|])* "
           "\"<|end|><|start|>assistant\")? ";
  }
  ReasoningTags t = ReasoningTagsFor(syntax.format);
  std::string text = "([^<] | \"<\" [^" + std::string(1, t.close[1]) + "])*";
  if (syntax.thinking_forced_open) return text + " " + Lit(t.close) + " cws ";
  if (!syntax.allow_reasoning) return "";
  return "(" + Lit(t.open) + " " + text + " " + Lit(t.close) + " cws)? ";
}

}  // namespace

StatusOr<std::string> ToolCallGrammar(const ChatSyntax& syntax,
                                      const Json& tools,
                                      const Json& tool_choice, bool parallel) {
  F f = syntax.format;
  if (f == F::kGeneric) return GenericToolGrammar(tools, tool_choice, parallel);
  if (f == F::kContentOnly) {
    return InvalidArgumentError(
        "format content-only has no tool-call syntax to force");
  }
  KV_ASSIGN_OR_RETURN(auto specs, SelectTools(tools, tool_choice, false));
  std::string rules = kCommonRules;
  std::string call = "call ::= ";
  std::string call_new = "call-new ::= ";
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string rule = "t" + std::to_string(i);
    KV_ASSIGN_OR_RETURN(std::string e, CallExpr(f, specs[i], rule, &rules));
    if (f == F::kMistral) {
      call_new += (i ? " | " : "") + e;
      std::string args = rule + "-args";
      e = JsonCall(specs[i].name, args);
    }
    call += (i ? " | (" : "(") + e + ")";
  }
  rules += call + "\n";
  if (f == F::kMistral) rules += call_new + "\n";
  return rules + "root ::= " + ReasoningPrefix(syntax) + "(" +
         Frame(f, parallel) + ")\n";
}

}  // namespace kvault::chat
