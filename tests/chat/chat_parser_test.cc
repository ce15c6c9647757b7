#include "chat/chat_parser.h"

#include <gtest/gtest.h>

#include "test_cases.h"

namespace kvault::chat {
namespace {

using testing::AllCases;
using testing::Call;
using testing::Case;
using testing::Syntax;

std::string Describe(const ChatMessage& m) {
  std::string s = "content=[" + m.content + "] reasoning=[" +
                  m.reasoning_content + "] calls=";
  for (const ToolCall& c : m.tool_calls) {
    s += "{" + c.name + " " + c.arguments + " id=" + c.id + "}";
  }
  return s;
}

class ScriptedOutputTest : public ::testing::TestWithParam<Case> {};

TEST_P(ScriptedOutputTest, ParsesToExpectedMessage) {
  const Case& c = GetParam();
  ChatMessage got = ParseChatOutput(c.text, c.syntax, /*is_partial=*/false);
  EXPECT_EQ(got, c.want) << "got:  " << Describe(got)
                         << "\nwant: " << Describe(c.want);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, ScriptedOutputTest,
                         ::testing::ValuesIn(AllCases()),
                         [](const auto& info) { return info.param.label; });

TEST(ChatParserTest, ParseToolCallsFalseLeavesSyntaxInContent) {
  ChatSyntax s = Syntax(ToolCallFormat::kHermes);
  s.parse_tool_calls = false;
  std::string text = "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>";
  ChatMessage m = ParseChatOutput(text, s, false);
  EXPECT_EQ(m.content, text);
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ChatParserTest, PartialHoldsBackPossibleMarker) {
  ChatSyntax s = Syntax(ToolCallFormat::kHermes);
  EXPECT_EQ(ParseChatOutput("Hello <tool_ca", s, true).content, "Hello");
  EXPECT_EQ(ParseChatOutput("Hello <tool_ca", s, false).content,
            "Hello <tool_ca");
  EXPECT_EQ(ParseChatOutput("<thi", s, true), ChatMessage{});
  EXPECT_EQ(ParseChatOutput("<think>abc</thi", s, true).reasoning_content,
            "abc");
}

// An unfinished call shows once its name is whole, with what is certain of
// its arguments (issue 41: clients showing arguments as they stream saw
// nothing until the closing marker); its text never reaches content.
TEST(ChatParserTest, PartialShowsUnfinishedCallAsFarAsCertainAndSplitUtf8) {
  ChatSyntax s = Syntax(ToolCallFormat::kHermes);
  ChatMessage m = ParseChatOutput("Hi <tool_call>{\"name\":\"f", s, true);
  EXPECT_EQ(m.content, "Hi");
  EXPECT_TRUE(m.tool_calls.empty());  // the name may still grow
  m = ParseChatOutput("Hi <tool_call>{\"name\":\"f\",\"arguments\":{", s, true);
  EXPECT_EQ(m.content, "Hi");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "f");
  EXPECT_EQ(m.tool_calls[0].arguments, "{");
  m = ParseChatOutput(
      "Hi <tool_call>{\"name\":\"f\",\"arguments\":{\"n\": 12", s, true);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"n\":");  // 12 may grow
  m = ParseChatOutput(
      "Hi <tool_call>{\"name\":\"f\",\"arguments\":{\"n\": \"a\\u00", s,
      true);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"n\":\"a");  // half an escape
  std::string euro = "\xE2\x82\xAC";  // €
  EXPECT_EQ(ParseChatOutput("1" + euro.substr(0, 2), s, true).content, "1");
  EXPECT_EQ(ParseChatOutput("1" + euro, s, true).content, "1" + euro);
}

TEST(ChatParserTest, ReasoningNoneKeepsTagsInContent) {
  ChatSyntax s = Syntax(ToolCallFormat::kContentOnly, ReasoningFormat::kNone);
  ChatMessage m = ParseChatOutput("<think>x</think>\ny", s, false);
  EXPECT_EQ(m.content, "<think>x</think>\ny");
  EXPECT_EQ(m.reasoning_content, "");
}

TEST(ChatParserTest, ToolCallFormatNamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(ToolCallFormat::kApriel); ++i) {
    auto f = static_cast<ToolCallFormat>(i);
    StatusOr<ToolCallFormat> back = ParseToolCallFormat(ToolCallFormatName(f));
    ASSERT_TRUE(back.ok()) << ToolCallFormatName(f);
    EXPECT_EQ(*back, f);
  }
  EXPECT_FALSE(ParseToolCallFormat("nope").ok());
}

TEST(ChatParserTest, ParseReasoningFormatMatchesLlamaServerValues) {
  EXPECT_EQ(*ParseReasoningFormat("none"), ReasoningFormat::kNone);
  EXPECT_EQ(*ParseReasoningFormat("deepseek"), ReasoningFormat::kDeepSeek);
  EXPECT_EQ(*ParseReasoningFormat("deepseek-legacy"),
            ReasoningFormat::kDeepSeekLegacy);
  EXPECT_EQ(*ParseReasoningFormat("auto"), ReasoningFormat::kAuto);
  StatusOr<ReasoningFormat> bad = ParseReasoningFormat("qwen");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'qwen'"), std::string_view::npos);
  EXPECT_NE(bad.status().message().find("deepseek-legacy"),
            std::string_view::npos);
}

}  // namespace
}  // namespace kvault::chat

namespace kvault::chat {
namespace {

// XML-style values are bare text: the tool's schema decides "42" (a string
// parameter keeps the text) against 42 (an integer parameter).
TEST(ChatParserTest, SchemaTypesXmlArguments) {
  ChatSyntax s;
  s.format = ToolCallFormat::kQwen3Coder;
  const std::string text =
      "<tool_call>\n<function=write>\n<parameter=path>\n42\n</parameter>\n"
      "<parameter=body>\n{\"a\": 1}\n</parameter>\n<parameter=mode>\n7\n"
      "</parameter>\n<parameter=flag>\nnull\n</parameter>\n</function>\n"
      "</tool_call>";
  ChatMessage guessed = ParseChatOutput(text, s, false);
  ASSERT_EQ(guessed.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(guessed.tool_calls[0].arguments),
            nlohmann::json::parse(
                R"({"path": 42, "body": {"a": 1}, "mode": 7, "flag": null})"));
  s.tools = std::make_shared<const nlohmann::ordered_json>(
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
        "name": "write", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "body": {"type": "string"},
        "mode": {"type": "integer"}, "flag": {"type": ["string", "null"]}
        }}}}])"));
  ChatMessage typed = ParseChatOutput(text, s, false);
  ASSERT_EQ(typed.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(typed.tool_calls[0].arguments),
            nlohmann::json::parse(
                R"({"path": "42", "body": "{\"a\": 1}", "mode": 7,
                    "flag": null})"));
  EXPECT_TRUE(typed.tool_calls[0].raw_arguments.empty());
}

}  // namespace
}  // namespace kvault::chat
