#include "chat/tool_grammar.h"

#include <gtest/gtest.h>

#include "chat/chat_parser.h"
#include "grammar/grammar.h"

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;
using F = ToolCallFormat;

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {
        "location": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["location", "unit"]}}},
    {"type": "function", "function": {"name": "count",
      "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}}}])");
}

struct GrammarCase {
  F format;
  std::string valid;  // a call to get_weather(Paris, c)
};

void PrintTo(const GrammarCase& c, std::ostream* os) {
  *os << ToolCallFormatName(c.format);
}

const char kArgs[] = R"({"location": "Paris", "unit": "c"})";

std::vector<GrammarCase> Cases() {
  std::string a = kArgs;
  std::string jc = R"({"name": "get_weather", "arguments": )" + a + "}";
  return {
      {F::kHermes, "<tool_call>\n" + jc + "\n</tool_call>"},
      {F::kQwen3Coder,
       "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</"
       "parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</"
       "tool_call>"},
      {F::kSeedOss,
       "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Paris</"
       "parameter>\n<parameter=unit>c</parameter>\n</function>\n</"
       "seed:tool_call>"},
      {F::kGlm45,
       "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</"
       "arg_value>\n<arg_key>unit</arg_key>\n<arg_value>c</arg_value>\n</"
       "tool_call>"},
      {F::kMiniMaxM2,
       "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
       "name=\"location\">Paris</parameter>\n<parameter "
       "name=\"unit\">c</parameter>\n</invoke>\n</minimax:tool_call>"},
      {F::kDeepSeekDsml,
       "<｜DSML｜tool_calls>\n<｜DSML｜invoke "
       "name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" "
       "string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter "
       "name=\"unit\" "
       "string=\"true\">c</｜DSML｜parameter>\n</｜DSML｜invoke>\n</"
       "｜DSML｜tool_calls>"},
      {F::kLlama3Json, R"({"name": "get_weather", "parameters": )" + a + "}"},
      {F::kMistral, "[TOOL_CALLS]get_weather[ARGS]" + a},
      {F::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_"
       "weather\n```json\n" +
           a + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {F::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" +
           a + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {F::kCommandR,
       R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": )" +
           a + "}]<|END_ACTION|>"},
      {F::kGptOss,
       "<|channel|>commentary to=functions.get_weather "
       "<|constrain|>json<|message|>" +
           a + "<|call|>"},
      {F::kKimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<"
       "|tool_call_argument_begin|>" +
           a + "<|tool_call_end|><|tool_calls_section_end|>"},
      {F::kGranite, "<|tool_call|>[" + jc + "]"},
      {F::kApriel, "<tool_calls>[" + jc + "]</tool_calls>"},
      {F::kFunctionaryV32, "get_weather\n" + a},
      {F::kGeneric, R"({"tool_call": )" + jc + "}"},
  };
}

// Replaces the first `from` in `s` with `to`.
std::string Replace(std::string s, std::string_view from, std::string_view to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << s;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

StatusOr<Grammar> Build(const ChatSyntax& syntax, const Json& choice,
                        bool parallel) {
  StatusOr<std::string> g = ToolCallGrammar(syntax, Tools(), choice, parallel);
  if (!g.ok()) return g.status();
  StatusOr<Grammar> parsed = Grammar::Parse(*g);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << *g;
  return parsed;
}

class ToolGrammarTest : public ::testing::TestWithParam<GrammarCase> {};

TEST_P(ToolGrammarTest, AcceptsValidCallAndParsesItBack) {
  ChatSyntax syntax;
  syntax.format = GetParam().format;
  syntax.reasoning_format = ReasoningFormat::kDeepSeek;
  StatusOr<Grammar> g = Build(syntax, "required", false);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Accepts(GetParam().valid)) << GetParam().valid;
  ChatMessage m = ParseChatOutput(GetParam().valid, syntax, false);
  ASSERT_EQ(m.tool_calls.size(), 1u) << m.content;
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(m.tool_calls[0].arguments), Json::parse(kArgs));
}

TEST_P(ToolGrammarTest, RejectsArgumentsOutsideTheSchema) {
  ChatSyntax syntax;
  syntax.format = GetParam().format;
  StatusOr<Grammar> g = Build(syntax, "required", false);
  ASSERT_TRUE(g.ok()) << g.status();
  // The unit is written "c" in JSON formats, >c< or >\nc\n< in XML ones.
  std::string bad_enum = GetParam().valid;
  for (auto [from, to] :
       {std::pair{"\"c\"", "\"k\""}, {">c<", ">k<"}, {">\nc\n<", ">\nk\n<"}}) {
    if (bad_enum.find(from) != std::string::npos) {
      bad_enum = Replace(bad_enum, from, to);
      break;
    }
  }
  ASSERT_NE(bad_enum, GetParam().valid);
  EXPECT_FALSE(g->Accepts(bad_enum)) << bad_enum;
  std::string bad_name = Replace(GetParam().valid, "get_weather", "get_wether");
  EXPECT_FALSE(g->Accepts(bad_name)) << bad_name;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, ToolGrammarTest,
                         ::testing::ValuesIn(Cases()), [](const auto& info) {
                           std::string n =
                               ToolCallFormatName(info.param.format);
                           for (char& c : n)
                             if (!isalnum(c)) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace kvault::chat

namespace kvault::chat {
namespace {

ChatSyntax HermesSyntax() {
  ChatSyntax s;
  s.format = F::kHermes;
  return s;
}

TEST(ToolGrammarTest, NamedChoiceAllowsOnlyThatTool) {
  Json choice = {{"type", "function"}, {"function", {{"name", "count"}}}};
  StatusOr<Grammar> g = Build(HermesSyntax(), choice, false);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(
      g->Accepts("<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": "
                 "3}}\n</tool_call>"));
  EXPECT_FALSE(
      g->Accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " +
                 std::string(kArgs) + "}\n</tool_call>"));
  EXPECT_FALSE(
      g->Accepts("<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": "
                 "\"3\"}}\n</tool_call>"));
}

TEST(ToolGrammarTest, ParallelAllowsSeveralCallsOnlyWhenAsked) {
  std::string one =
      "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": "
      "1}}\n</tool_call>";
  StatusOr<Grammar> single = Build(HermesSyntax(), "required", false);
  StatusOr<Grammar> many = Build(HermesSyntax(), "required", true);
  ASSERT_TRUE(single.ok() && many.ok());
  EXPECT_FALSE(single->Accepts(one + "\n" + one));
  EXPECT_TRUE(many->Accepts(one + "\n" + one));
  EXPECT_TRUE(many->Accepts(one));
}

TEST(ToolGrammarTest, ForcedOpenThinkingMustCloseFirst) {
  ChatSyntax s = HermesSyntax();
  s.thinking_forced_open = true;
  StatusOr<Grammar> g = Build(s, "required", false);
  ASSERT_TRUE(g.ok()) << g.status();
  std::string call =
      "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": "
      "1}}\n</tool_call>";
  EXPECT_TRUE(g->Accepts("Let me count.\n</think>\n" + call));
  EXPECT_FALSE(g->Accepts(call));
  StatusOr<Grammar> optional = Build(HermesSyntax(), "required", false);
  ASSERT_TRUE(optional.ok());
  EXPECT_TRUE(optional->Accepts("<think>hm</think>\n" + call));
  EXPECT_TRUE(optional->Accepts(call));
}

TEST(ToolGrammarTest, BadToolsAreInvalidArgumentNamingTheTool) {
  Json bad_params = Json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","patternProperties":{}}}}])");
  StatusOr<std::string> g =
      ToolCallGrammar(HermesSyntax(), bad_params, "required", false);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("tool 'f'"), std::string_view::npos)
      << g.status();

  Json no_name = Json::parse(R"([{"type":"function","function":{}}])");
  EXPECT_FALSE(
      ToolCallGrammar(HermesSyntax(), no_name, "required", false).ok());
  Json bad_name =
      Json::parse(R"([{"type":"function","function":{"name":"a b"}}])");
  EXPECT_FALSE(
      ToolCallGrammar(HermesSyntax(), bad_name, "required", false).ok());
  Json unknown = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  StatusOr<std::string> u =
      ToolCallGrammar(HermesSyntax(), Tools(), unknown, false);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("'nope'"), std::string_view::npos);
  EXPECT_FALSE(ToolCallGrammar(HermesSyntax(), Tools(), "auto", false).ok());
  ChatSyntax content_only;
  EXPECT_FALSE(ToolCallGrammar(content_only, Tools(), "required", false).ok());
}

TEST(GenericToolsTest, AutoAllowsResponseRequiredDoesNot) {
  StatusOr<std::string> a = GenericToolGrammar(Tools(), "auto", true);
  StatusOr<std::string> r = GenericToolGrammar(Tools(), "required", false);
  ASSERT_TRUE(a.ok() && r.ok());
  StatusOr<Grammar> ga = Grammar::Parse(*a);
  StatusOr<Grammar> gr = Grammar::Parse(*r);
  ASSERT_TRUE(ga.ok() && gr.ok()) << ga.status() << gr.status();
  std::string response = R"({"response": "Hello \"there\""})";
  std::string calls =
      R"({"tool_calls": [{"name": "count", "arguments": {"n": 1}}, {"name": "count", "arguments": {"n": 2}}]})";
  EXPECT_TRUE(ga->Accepts(response));
  EXPECT_TRUE(ga->Accepts(calls));
  EXPECT_FALSE(gr->Accepts(response));
  EXPECT_FALSE(gr->Accepts(calls));  // not parallel
  ChatSyntax s;
  s.format = F::kGeneric;
  ChatMessage m = ParseChatOutput(calls, s, false);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"n":2})");
  EXPECT_EQ(ParseChatOutput(response, s, false).content, "Hello \"there\"");
}

TEST(GenericToolsTest, SystemPromptListsToolsAndShapes) {
  std::string p = GenericToolSystemPrompt(Tools(), true);
  EXPECT_NE(p.find("get_weather"), std::string::npos);
  EXPECT_NE(p.find("\"tool_call\""), std::string::npos);
  EXPECT_NE(p.find("\"tool_calls\""), std::string::npos);
  EXPECT_NE(p.find("\"response\""), std::string::npos);
  EXPECT_EQ(GenericToolSystemPrompt(Tools(), false).find("\"tool_calls\""),
            std::string::npos);
}

}  // namespace
}  // namespace kvault::chat
