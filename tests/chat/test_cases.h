// Scripted model outputs shared by the parser and streaming tests: each is
// a reply in one format with the message it must parse to.
#ifndef KVAULT_TESTS_CHAT_TEST_CASES_H_
#define KVAULT_TESTS_CHAT_TEST_CASES_H_

#include <ostream>
#include <string>
#include <vector>

#include "chat/chat_syntax.h"

namespace kvault::chat::testing {

struct Case {
  std::string label;
  ChatSyntax syntax;
  std::string text;
  ChatMessage want;
};

// Keeps gtest from dumping a Case's bytes in test names and failures.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

inline ChatSyntax Syntax(ToolCallFormat f,
                         ReasoningFormat r = ReasoningFormat::kDeepSeek,
                         bool forced_open = false) {
  ChatSyntax s;
  s.format = f;
  s.reasoning_format = r;
  s.thinking_forced_open = forced_open;
  return s;
}

inline ToolCall Call(std::string name, std::string args, std::string id = "") {
  return {std::move(name), std::move(args), std::move(id)};
}

using F = ToolCallFormat;
using R = ReasoningFormat;

// Returns every scripted case.
inline std::vector<Case> AllCases() {
  const std::string w = R"({"location":"Paris","unit":"c"})";
  const std::string nested =
      R"({"q":{"a":[1,{"b":"x}y"}],"n":null},"s":"\"quoted\" </tool_call> ]"})";
  return {
      // --- content only / reasoning ---
      {"plain",
       Syntax(F::kContentOnly),
       "Hello, world!\n",
       {"Hello, world!\n", "", {}}},
      {"think",
       Syntax(F::kContentOnly),
       "<think>\nLet me see.\n</think>\n\nIt is 4.",
       {"It is 4.", "Let me see.", {}}},
      {"think_none",
       Syntax(F::kHermes, R::kNone),
       "<think>a "
       "<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call></think>Hi",
       {"<think>a "
        "<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call></think>Hi",
        "",
        {}}},
      {"think_forced_open",
       Syntax(F::kContentOnly, R::kDeepSeek, true),
       "I should add.\n</think>\n4",
       {"4", "I should add.", {}}},
      {"think_forced_open_unclosed",
       Syntax(F::kContentOnly, R::kAuto, true),
       "still thinking ",
       {"", "still thinking", {}}},
      {"think_unclosed",
       Syntax(F::kHermes),
       "<think>hmm <tool_call>{\"name\":\"x\"}</tool_call>",
       {"", "hmm <tool_call>{\"name\":\"x\"}</tool_call>", {}}},
      {"think_legacy_inline",
       [] {
         auto s = Syntax(F::kContentOnly, R::kDeepSeekLegacy);
         s.reasoning_in_content = true;
         return s;
       }(),
       "<think>r</think>answer",
       {"<think>r</think>answer", "", {}}},
      {"unicode",
       Syntax(F::kContentOnly),
       "<think>日本語 ✓</think>Ünïcödé 🎉",
       {"Ünïcödé 🎉", "日本語 ✓", {}}},
      // --- Hermes ---
      {"hermes_single",
       Syntax(F::kHermes),
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
       "\"Paris\", \"unit\": \"c\"}}\n</tool_call>",
       {"", "", {Call("get_weather", w)}}},
      {"hermes_parallel_content",
       Syntax(F::kHermes),
       "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": "
       "{}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": "
       "{\"x\": 1}}\n</tool_call>",
       {"Let me check both.", "", {Call("a", "{}"), Call("b", R"({"x":1})")}}},
      {"hermes_reasoning_call",
       Syntax(F::kHermes),
       "<think>Need "
       "weather.</"
       "think>\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{"
       "\"location\":\"Paris\",\"unit\":\"c\"}}</tool_call>",
       {"", "Need weather.", {Call("get_weather", w)}}},
      {"hermes_nested_close_marker",
       Syntax(F::kHermes),
       "<tool_call>{\"name\":\"f\",\"arguments\":" + nested + "}</tool_call>",
       {"", "", {Call("f", nested)}}},
      {"hermes_malformed",
       Syntax(F::kHermes),
       "Try <tool_call>{\"name\": oops}</tool_call> done",
       {"Try <tool_call>{\"name\": oops}</tool_call> done", "", {}}},
      {"hermes_truncated",
       Syntax(F::kHermes),
       "A <tool_call>{\"name\":\"f\",\"argu",
       {"A <tool_call>{\"name\":\"f\",\"argu", "", {}}},
      {"hermes_unicode_args",
       Syntax(F::kHermes),
       "<tool_call>{\"name\":\"say\",\"arguments\":{\"t\":\"héllo 世界 "
       "\\u00e9\"}}</tool_call>",
       {"", "", {Call("say", R"({"t":"héllo 世界 é"})")}}},
      {"hermes_string_args",
       Syntax(F::kHermes),
       "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}</"
       "tool_call>after",
       {"after", "", {Call("f", R"({"a":1})")}}},
      {"hermes_xml_inside",
       Syntax(F::kHermes),
       "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</"
       "function>\n</tool_call>",
       {"", "", {Call("f", R"({"a":1})")}}},
      // --- Qwen3-Coder / Seed-OSS ---
      {"qwen3coder",
       Syntax(F::kQwen3Coder),
       "I'll "
       "look.\n<tool_call>\n<function=get_weather>\n<parameter=location>"
       "\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</"
       "function>\n</tool_call>",
       {"I'll look.", "", {Call("get_weather", w)}}},
      {"qwen3coder_typed_and_marker_in_value",
       Syntax(F::kQwen3Coder),
       "<tool_call>\n<function=run>\n<parameter=code>\nprint('</"
       "parameter>')\nx = "
       "1\n</parameter>\n<parameter=n>\n3\n</"
       "parameter>\n<parameter=o>\n{\"k\": [1, "
       "2]}\n</parameter>\n</function>\n</"
       "tool_call>\n<tool_call>\n<function=noargs>\n</function>\n</tool_call>",
       {"",
        "",
        {Call(
             "run",
             R"({"code":"print('</parameter>')\nx = 1","n":3,"o":{"k":[1,2]}})"),
         Call("noargs", "{}")}}},
      {"qwen3coder_malformed",
       Syntax(F::kQwen3Coder),
       "<tool_call>\n<function=bad name>\n</function>\n</tool_call>",
       {"<tool_call>\n<function=bad name>\n</function>\n</tool_call>", "", {}}},
      {"seed_oss",
       Syntax(F::kSeedOss),
       "<seed:think>plan</"
       "seed:think>ok<seed:tool_call>\n<function=get_weather>\n<parameter="
       "location>Paris</parameter>\n<parameter=unit>c</parameter>\n</"
       "function>\n</seed:tool_call>",
       {"ok", "plan", {Call("get_weather", w)}}},
      // --- GLM 4.5 ---
      {"glm45",
       Syntax(F::kGlm45),
       "\n<think>check</think>\n<tool_call>get_weather\n<arg_key>location</"
       "arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</"
       "arg_key>\n<arg_value>c</arg_value>\n</tool_call><tool_call>ping\n</"
       "tool_call>",
       {"", "check", {Call("get_weather", w), Call("ping", "{}")}}},
      {"glm45_value_with_marker",
       Syntax(F::kGlm45),
       "<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>a</arg_value>b</"
       "arg_value>\n</tool_call>",
       {"", "", {Call("f", R"({"s":"a</arg_value>b"})")}}},
      // --- Llama 3 ---
      {"llama3_json",
       Syntax(F::kLlama3Json),
       "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\", "
       "\"unit\": \"c\"}}",
       {"", "", {Call("get_weather", w)}}},
      {"llama3_two",
       Syntax(F::kLlama3Json),
       "{\"type\": \"function\", \"name\": \"a\", \"parameters\": {}}; "
       "{\"name\": \"b\", \"parameters\": {\"x\": \"}\"}}",
       {"", "", {Call("a", "{}"), Call("b", R"({"x":"}"})")}}},
      {"llama3_not_a_call",
       Syntax(F::kLlama3Json),
       "{\"answer\": 42} is the JSON",
       {"{\"answer\": 42} is the JSON", "", {}}},
      {"llama3_python_tag_builtin",
       Syntax(F::kLlama3Json),
       "<|python_tag|>brave_search.call(query=\"kvault \\\"db\\\"\")",
       {"", "", {Call("brave_search", R"({"query":"kvault \"db\""})")}}},
      {"llama3_python_tag_code",
       Syntax(F::kLlama3Json),
       "<|python_tag|>print(1 + 1)\n",
       {"", "", {Call("python", R"({"code":"print(1 + 1)\n"})")}}},
      // --- Mistral ---
      {"mistral_nemo",
       Syntax(F::kMistral),
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": "
       "\"Paris\", \"unit\": \"c\"}, \"id\": \"abcDEF123\"}, {\"name\": \"b\", "
       "\"arguments\": {}}]",
       {"", "", {Call("get_weather", w, "abcDEF123"), Call("b", "{}")}}},
      {"mistral_small",
       Syntax(F::kMistral),
       "Sure.[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{\"location\": "
       "\"Paris\", \"unit\": \"c\"}[TOOL_CALLS]b[ARGS]{}",
       {"Sure.", "", {Call("get_weather", w, "abcDEF123"), Call("b", "{}")}}},
      {"mistral_malformed",
       Syntax(F::kMistral),
       "[TOOL_CALLS] not json",
       {"[TOOL_CALLS] not json", "", {}}},
      // --- DeepSeek ---
      {"deepseek_r1",
       Syntax(F::kDeepSeekR1, R::kDeepSeek, true),
       "Thinking.\n</"
       "think>\n\nCalling.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<"
       "｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\", \"unit\": "
       "\"c\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<"
       "｜tool▁sep｜>b\n```json\n{}\n```<｜tool▁call▁end｜><"
       "｜tool▁calls▁end｜>",
       {"Calling.", "Thinking.", {Call("get_weather", w), Call("b", "{}")}}},
      {"deepseek_v31",
       Syntax(F::kDeepSeekV31),
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"
       "\"location\": \"Paris\", \"unit\": "
       "\"c\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {"", "", {Call("get_weather", w)}}},
      {"deepseek_v31_reasoning",
       Syntax(F::kDeepSeekV31, R::kDeepSeek, true),
       "why</"
       "think>ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"
       "\"a\":\"<｜tool▁call▁end｜>\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {"ok", "why", {Call("f", R"({"a":"<｜tool▁call▁end｜>"})")}}},
      {"dsml",
       Syntax(F::kDeepSeekDsml),
       "<think>t</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
       "name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" "
       "string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter "
       "name=\"unit\" "
       "string=\"true\">c</｜DSML｜parameter>\n</"
       "｜DSML｜invoke>\n<｜DSML｜invoke name=\"n\">\n<｜DSML｜parameter "
       "name=\"v\" "
       "string=\"false\">12</｜DSML｜parameter>\n</｜DSML｜invoke>\n</"
       "｜DSML｜tool_calls>",
       {"", "t", {Call("get_weather", w), Call("n", R"({"v":12})")}}},
      // --- Command R ---
      {"command_r7b",
       Syntax(F::kCommandR),
       "<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[\n{\"tool_call_"
       "id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
       "{\"location\": \"Paris\", \"unit\": \"c\"}}\n]<|END_ACTION|>",
       {"", "plan", {Call("get_weather", w, "0")}}},
      {"command_r_response",
       Syntax(F::kCommandR),
       "<|START_RESPONSE|>Hi there<|END_RESPONSE|>",
       {"Hi there", "", {}}},
      {"command_r_plus_action",
       Syntax(F::kCommandR),
       "Action: ```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n   "
       "     \"parameters\": {\"location\": \"Paris\", \"unit\": \"c\"}\n    "
       "}\n]\n```",
       {"", "", {Call("get_weather", w)}}},
      {"command_r_action_prose",
       Syntax(F::kCommandR),
       "Action: none needed.",
       {"Action: none needed.", "", {}}},
      // --- GPT-OSS ---
      {"gpt_oss_call",
       Syntax(F::kGptOss),
       "<|channel|>analysis<|message|>Need "
       "weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather "
       "<|constrain|>json<|message|>{\"location\":\"Paris\",\"unit\":\"c\"}<|"
       "call|>",
       {"", "Need weather.", {Call("get_weather", w)}}},
      {"gpt_oss_final",
       Syntax(F::kGptOss),
       "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>"
       "final<|message|>It is 4.",
       {"It is 4.", "Easy.", {}}},
      {"gpt_oss_recipient_first",
       Syntax(F::kGptOss),
       "<|start|>assistant to=functions.f<|channel|>commentary "
       "json<|message|>{}<|call|>",
       {"", "", {Call("f", "{}")}}},
      // --- Kimi K2 ---
      {"kimi_k2",
       Syntax(F::kKimiK2),
       "<think>k</"
       "think>Checking.<|tool_calls_section_begin|><|tool_call_begin|>"
       "functions.get_weather:0<|tool_call_argument_begin|>{\"location\": "
       "\"Paris\", \"unit\": "
       "\"c\"}<|tool_call_end|><|tool_call_begin|>functions.b:1<|tool_call_"
       "argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
       {"Checking.",
        "k",
        {Call("get_weather", w, "functions.get_weather:0"),
         Call("b", "{}", "functions.b:1")}}},
      // --- MiniMax-M2 ---
      {"minimax_m2",
       Syntax(F::kMiniMaxM2, R::kDeepSeek, true),
       "plan\n</think>\n\n<minimax:tool_call>\n<invoke "
       "name=\"get_weather\">\n<parameter "
       "name=\"location\">Paris</parameter>\n<parameter "
       "name=\"unit\">c</parameter>\n</invoke>\n</minimax:tool_call>",
       {"", "plan", {Call("get_weather", w)}}},
      // --- Granite ---
      {"granite",
       Syntax(F::kGranite),
       "<think>t</think><response>Calling.</response><|tool_call|>[{\"name\": "
       "\"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": "
       "\"c\"}}]",
       {"Calling.", "t", {Call("get_weather", w)}}},
      // --- Apriel / MiniMax-M1 ---
      {"apriel",
       Syntax(F::kApriel),
       "<thinking>r</thinking>\n<tool_calls>[{\"name\": \"get_weather\", "
       "\"arguments\": {\"location\": \"Paris\", \"unit\": "
       "\"c\"}}]</tool_calls>",
       {"", "r", {Call("get_weather", w)}}},
      {"minimax_m1_lines",
       Syntax(F::kApriel),
       "<tool_calls>\n{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b\", "
       "\"arguments\": {\"x\": 2}}\n</tool_calls>",
       {"", "", {Call("a", "{}"), Call("b", R"({"x":2})")}}},
      // --- Functionary v3.2 ---
      {"functionary_text_then_call",
       Syntax(F::kFunctionaryV32),
       "all\nLet me check.>>>get_weather\n{\"location\": \"Paris\", \"unit\": "
       "\"c\"}>>>b\n{}",
       {"Let me check.", "", {Call("get_weather", w), Call("b", "{}")}}},
      {"functionary_python",
       Syntax(F::kFunctionaryV32),
       "python\nprint('>>')",
       {"", "", {Call("python", R"j({"code":"print('>>')"})j")}}},
      // --- generic ---
      {"generic_call",
       Syntax(F::kGeneric),
       "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": "
       "{\"location\": \"Paris\", \"unit\": \"c\"}}}",
       {"", "", {Call("get_weather", w)}}},
      {"generic_calls",
       Syntax(F::kGeneric),
       "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {}}, {\"name\": "
       "\"b\", \"arguments\": {\"y\": [true]}}]}",
       {"", "", {Call("a", "{}"), Call("b", R"({"y":[true]})")}}},
      {"generic_response",
       Syntax(F::kGeneric),
       "{\"response\": \"Hi \\\"you\\\" \\u00e9\\ud83d\\ude00\\nbye\"}",
       {"Hi \"you\" é😀\nbye", "", {}}},
      {"generic_plain",
       Syntax(F::kGeneric),
       "Just text.",
       {"Just text.", "", {}}},
      {"generic_bad_json",
       Syntax(F::kGeneric),
       "{\"tool_call\": [1,}",
       {"{\"tool_call\": [1,}", "", {}}},
  };
}

}  // namespace kvault::chat::testing

#endif  // KVAULT_TESTS_CHAT_TEST_CASES_H_
