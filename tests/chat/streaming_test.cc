// The streaming contract: parsing every prefix of a reply gives results
// that only grow, and the deltas between them add up to the final message.
#include <gtest/gtest.h>

#include "chat/chat_deltas.h"
#include "chat/chat_parser.h"
#include "test_cases.h"

namespace kvault::chat {
namespace {

using Json = nlohmann::ordered_json;
using testing::AllCases;
using testing::Case;

bool IsPrefix(const std::string& a, const std::string& b) {
  return b.compare(0, a.size(), a) == 0 && a.size() <= b.size();
}

// Applies `deltas` to a client-side message, the way an OpenAI client does.
void Apply(const std::vector<Json>& deltas, ChatMessage* client) {
  for (const Json& d : deltas) {
    if (d.contains("content"))
      client->content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) {
      client->reasoning_content += d["reasoning_content"].get<std::string>();
    }
    if (!d.contains("tool_calls")) continue;
    for (const Json& tc : d["tool_calls"]) {
      size_t i = tc["index"].get<size_t>();
      if (i == client->tool_calls.size()) {
        ASSERT_EQ(tc["type"], "function");
        client->tool_calls.push_back(
            {tc["function"]["name"], "", tc.value("id", "")});
      }
      ASSERT_LT(i, client->tool_calls.size()) << "index skipped";
      client->tool_calls[i].arguments +=
          tc["function"]["arguments"].get<std::string>();
    }
  }
}

// Checks that `next` only extends `prev`.
void ExpectGrows(const ChatMessage& prev, const ChatMessage& next,
                 const std::string& where) {
  EXPECT_TRUE(IsPrefix(prev.content, next.content))
      << where << ": content [" << prev.content << "] -> [" << next.content
      << "]";
  EXPECT_TRUE(IsPrefix(prev.reasoning_content, next.reasoning_content))
      << where << ": reasoning [" << prev.reasoning_content << "] -> ["
      << next.reasoning_content << "]";
  ASSERT_LE(prev.tool_calls.size(), next.tool_calls.size()) << where;
  for (size_t i = 0; i < prev.tool_calls.size(); ++i) {
    EXPECT_EQ(prev.tool_calls[i].name, next.tool_calls[i].name) << where;
    EXPECT_TRUE(
        IsPrefix(prev.tool_calls[i].arguments, next.tool_calls[i].arguments))
        << where;
  }
}

// Streams `text` one byte at a time (the hardest split) and checks the
// contract; also `step`-byte chunks, as tokens arrive.
// A call shows while it is written (its JSON still open, or whole but
// before its closing marker); text that then breaks the block (a stray
// character where the marker belongs) leaves no call in the finished
// message, and only then may a shown call go.
void CheckStreaming(const ChatSyntax& syntax, const std::string& text,
                    size_t step) {
  const ChatMessage final_message = ParseChatOutput(text, syntax, false);
  ChatMessage prev, client;
  for (size_t n = step; n < text.size() + step; n += step) {
    bool last = n >= text.size();
    ChatMessage next = ParseChatOutput(text.substr(0, std::min(n, text.size())),
                                       syntax, /*is_partial=*/!last);
    std::string where = "prefix " + std::to_string(n);
    if (next.tool_calls.size() < prev.tool_calls.size()) {
      EXPECT_LT(final_message.tool_calls.size(), prev.tool_calls.size())
          << where << ": a shown call went, yet the finished text holds it";
      return;
    }
    ExpectGrows(prev, next, where);
    Apply(ChatDeltas(prev, next), &client);
    prev = std::move(next);
  }
  EXPECT_EQ(client, ParseChatOutput(text, syntax, false));
}

class StreamingTest : public ::testing::TestWithParam<Case> {};

TEST_P(StreamingTest, EveryPrefixGrowsAndDeltasSumToFinal) {
  const Case& c = GetParam();
  for (size_t step : {1, 3, 7}) {
    SCOPED_TRACE("step " + std::to_string(step));
    CheckStreaming(c.syntax, c.text, step);
  }
}

TEST_P(StreamingTest, HoldsUnderEveryReasoningFormat) {
  Case c = GetParam();
  for (ReasoningFormat r : {ReasoningFormat::kNone, ReasoningFormat::kAuto}) {
    c.syntax.reasoning_format = r;
    CheckStreaming(c.syntax, c.text, 1);
  }
  c.syntax.reasoning_in_content = true;
  CheckStreaming(c.syntax, c.text, 1);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, StreamingTest,
                         ::testing::ValuesIn(AllCases()),
                         [](const auto& info) { return info.param.label; });

// Replies stitched at random from marker fragments, JSON pieces and text:
// whatever they parse to, streaming must never retract and must add up.
TEST(StreamingFuzzTest, RandomRepliesKeepTheContract) {
  const std::vector<std::string> pieces = {
      "<tool_call>", "</tool_call>", "{\"name\": \"f\", \"arguments\": {}}",
      "{\"name\":\"g\",\"parameters\":{\"a\":\"}\"}}", "<think>", "</think>",
      "<function=f>", "<parameter=a>", "</parameter>", "</function>",
      "<arg_key>", "k", "</arg_key>", "<arg_value>", "</arg_value>",
      "[TOOL_CALLS]", "[ARGS]", "[{\"name\":\"h\",\"arguments\":{}}]",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
      "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "function", "```json",
      "```", "<|channel|>", "analysis", "final", "<|message|>", "<|end|>",
      "<|start|>assistant", " to=functions.f", "<|call|>", ">>>", "all\n",
      "f\n", "<|python_tag|>", "<minimax:tool_call>", "<invoke name=\"f\">",
      "</invoke>", "</minimax:tool_call>", "<|tool_call|>", "<tool_calls>",
      "</tool_calls>", "{\"response\": \"a\\u00e9", "\"}", "{\"tool_call\": ",
      "Action:", "<|START_ACTION|>", "<|END_ACTION|>", "hello", " ", "\n",
      "日本", "é", "{", "}", "\"", "\\", "<", "</", ">"};
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u; };
  for (int f = 0; f <= static_cast<int>(ToolCallFormat::kApriel); ++f) {
    for (int round = 0; round < 300; ++round) {
      std::string text;
      size_t n = 1 + (next() >> 8) % 12;
      for (size_t i = 0; i < n; ++i) text += pieces[(next() >> 8) % pieces.size()];
      ChatSyntax syntax;
      syntax.format = static_cast<ToolCallFormat>(f);
      syntax.reasoning_format = (next() >> 8) % 2 ? ReasoningFormat::kAuto
                                                  : ReasoningFormat::kNone;
      syntax.thinking_forced_open = (next() >> 8) % 4 == 0;
      SCOPED_TRACE(std::string(ToolCallFormatName(syntax.format)) + ": " + text);
      CheckStreaming(syntax, text, 1);
      if (HasFailure()) return;
    }
  }
}

TEST(ChatDeltasTest, NewCallCarriesIdTypeAndName) {
  ChatMessage prev;
  ChatMessage next{"", "", {{"f", "{\"a\":1}", "call_9"}}};
  std::vector<Json> d = ChatDeltas(prev, next);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(
      d[0].dump(),
      R"({"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]})");
}

TEST(ChatDeltasTest, GrowingArgumentsSendOnlyTheNewText) {
  ChatMessage prev{"a", "", {{"f", "{\"x\":", ""}}};
  ChatMessage next{"ab", "r", {{"f", "{\"x\":1}", ""}}};
  std::vector<Json> d = ChatDeltas(prev, next);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].dump(), R"({"reasoning_content":"r"})");
  EXPECT_EQ(d[1].dump(), R"({"content":"b"})");
  EXPECT_EQ(d[2].dump(),
            R"({"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]})");
}

TEST(ChatDeltasTest, NoChangeNoDeltas) {
  ChatMessage m{"x", "y", {{"f", "{}", ""}}};
  EXPECT_TRUE(ChatDeltas(m, m).empty());
}

}  // namespace
}  // namespace kvault::chat
