#include "server/chat_tools.h"

#include <gtest/gtest.h>

#include "server/chat_format.h"
#include "server/chat_reply.h"

namespace kvault {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const char kHermesTemplate[] =
    "{% for m in messages %}{{ m.content }}{% endfor %}"
    "{% if tools %}<tool_call>{% endif %}<think>";

json Tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type":
      "integer"}}, "required": ["x"]}}}])");
}

ChatFormat Hermes() { return *ChatFormat::FromJinja(kHermesTemplate); }

TEST(ChatToolsTest, ToolsBecomeVariablesAndTheFormatIsTheTemplates) {
  json body{{"tools", Tools()}};
  auto plan = PlanChatTools(body, nullptr, Hermes(), ChatOutputOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->has_tools);
  EXPECT_EQ(plan->syntax.format, chat::ToolCallFormat::kHermes);
  EXPECT_EQ(plan->vars["tools"][0]["function"]["name"], "f");
  EXPECT_TRUE(plan->syntax.parse_tool_calls);
  // The reply parser gets the tools, to type XML-style arguments.
  ASSERT_NE(plan->syntax.tools, nullptr);
  EXPECT_EQ((*plan->syntax.tools)[0]["function"]["name"], "f");
  // auto: sampling stays free; required: a grammar.
  EXPECT_EQ(*ToolGrammar(*plan), "");
  body["tool_choice"] = "required";
  plan = PlanChatTools(body, nullptr, Hermes(), ChatOutputOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NE(ToolGrammar(*plan)->find("tool_call"), std::string::npos);
}

TEST(ChatToolsTest, NoneAndAbsentToolsParseNoCalls) {
  auto plan = PlanChatTools(json::object(), nullptr, Hermes(),
                            ChatOutputOptions());
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_tools);
  EXPECT_FALSE(plan->syntax.parse_tool_calls);
  plan = PlanChatTools({{"tools", Tools()}, {"tool_choice", "none"}}, nullptr,
                       Hermes(), ChatOutputOptions());
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_tools);
  EXPECT_FALSE(plan->vars.contains("tools"));
}

TEST(ChatToolsTest, MalformedFieldsAreNamed) {
  const ChatOutputOptions o;
  auto r = PlanChatTools({{"tools", "f"}}, nullptr, Hermes(), o);
  EXPECT_NE(r.status().message().find("tools"), std::string::npos);
  r = PlanChatTools({{"tools", Tools()}, {"tool_choice", "always"}}, nullptr,
                    Hermes(), o);
  EXPECT_NE(r.status().message().find("tool_choice"), std::string::npos);
  r = PlanChatTools({{"tool_choice", "required"}}, nullptr, Hermes(), o);
  EXPECT_NE(r.status().message().find("non-empty 'tools'"), std::string::npos);
  r = PlanChatTools({{"reasoning_format", "loud"}}, nullptr, Hermes(), o);
  EXPECT_NE(r.status().message().find("loud"), std::string::npos);
  r = PlanChatTools({{"parallel_tool_calls", 1}}, nullptr, Hermes(), o);
  EXPECT_NE(r.status().message().find("parallel_tool_calls"),
            std::string::npos);
  // A built-in family cannot render tools: refused by name.
  r = PlanChatTools({{"tools", Tools()}}, nullptr, ChatFormat(), o);
  EXPECT_EQ(r.status().reason(), "unsupported_field");
}

// strict: true is enforced by the forcing grammar; under "auto" nothing
// would enforce it, so it is refused by name there.
TEST(ChatToolsTest, StrictNeedsAForcedCall) {
  json tools = Tools();
  tools[0]["function"]["strict"] = true;
  auto r = PlanChatTools({{"tools", tools}}, nullptr, Hermes(),
                         ChatOutputOptions());
  EXPECT_EQ(r.status().reason(), "unsupported_field");
  EXPECT_NE(r.status().message().find("tools[0].function.strict"),
            std::string::npos);
  r = PlanChatTools({{"tools", tools}, {"tool_choice", "required"}}, nullptr,
                    Hermes(), ChatOutputOptions());
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(ChatToolsTest, ReasoningOptionsBecomeTemplateVariables) {
  ChatOutputOptions o;
  o.enable_thinking = false;
  o.reasoning_effort = "high";
  auto plan = PlanChatTools(json::object(), nullptr, Hermes(), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->vars["enable_thinking"], false);
  EXPECT_EQ(plan->vars["reasoning_effort"], "high");
  plan = PlanChatTools({{"reasoning_effort", "low"}}, nullptr, Hermes(), o);
  EXPECT_EQ(plan->vars["reasoning_effort"], "low");
}

TEST(ChatToolsTest, ArgumentsTextBecomesAnObjectAndSystemPromptIsMerged) {
  const ordered_json messages = ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1",
       "type": "function", "function": {"name": "f",
       "arguments": "{\"x\": 1}"}}]}])");
  const ordered_json out = MessagesForTemplate(messages, "TOOLS");
  EXPECT_EQ(out[0]["content"], "Be brief.\n\nTOOLS");
  EXPECT_EQ(out[1]["tool_calls"][0]["function"]["arguments"]["x"], 1);
  const ordered_json no_system = MessagesForTemplate(
      ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), "TOOLS");
  EXPECT_EQ(no_system[0]["role"], "system");
  EXPECT_EQ(no_system.size(), 2u);
}

TEST(ChatToolsTest, PromptEndingInsideThinkForcesItOpen) {
  chat::ChatSyntax s;
  s.reasoning_format = chat::ReasoningFormat::kAuto;
  NoteForcedThinking("<|im_start|>assistant\n<think>\n", &s);
  EXPECT_TRUE(s.thinking_forced_open);
  chat::ChatSyntax closed = s;
  closed.thinking_forced_open = false;
  NoteForcedThinking("<think>\n</think>\n", &closed);
  EXPECT_FALSE(closed.thinking_forced_open);
  chat::ChatSyntax none;
  NoteForcedThinking("<think>\n", &none);  // reasoning_format none
  EXPECT_FALSE(none.thinking_forced_open);
}

TEST(ChatReplyReaderTest, StreamAndWholeReplyAgree) {
  chat::ChatSyntax s;
  s.format = chat::ToolCallFormat::kHermes;
  s.reasoning_format = chat::ReasoningFormat::kAuto;
  const std::string reply =
      "<think>plan</think>Hi.<tool_call>\n{\"name\": \"f\", \"arguments\": "
      "{\"x\": 2}}\n</tool_call>";
  ChatReplyReader stream(s);
  std::string content, reasoning, args, id;
  std::vector<json> deltas;
  for (char c : reply) {
    for (json& d : stream.Feed(std::string(1, c))) deltas.push_back(d);
  }
  for (json& d : stream.Finish()) deltas.push_back(d);
  for (const json& d : deltas) {
    content += d.value("content", "");
    reasoning += d.value("reasoning_content", "");
    for (const json& t : d.value("tool_calls", json::array())) {
      args += t["function"].value("arguments", "");
      if (t.contains("id")) id = t["id"];
    }
  }
  ChatReplyReader whole(s);
  const json m = whole.Message(reply);
  EXPECT_EQ(m["content"], content);
  EXPECT_EQ(m["reasoning_content"], reasoning);
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], args);
  EXPECT_EQ(id.size(), 5u + 24u);
  EXPECT_TRUE(stream.has_tool_calls());
  EXPECT_EQ(ChatFinishReason("stop", true), "tool_calls");
  EXPECT_EQ(ChatFinishReason("length", true), "length");
  EXPECT_EQ(ChatFinishReason("stop", false), "stop");
}

// Regression (issue 41 item 4): a call arrived as one delta after its
// closing marker. Now its name shows once whole and its arguments grow as
// they are generated, in formats whose arguments are JSON.
TEST(ChatReplyReaderTest, CallArgumentsStreamAsTheyAreWritten) {
  struct Case {
    chat::ToolCallFormat format;
    std::string reply;
  };
  const std::vector<Case> cases = {
      {chat::ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"},
      {chat::ToolCallFormat::kLlama3Json,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", "
       "\"days\": 3}}"}};
  for (const Case& c : cases) {
    chat::ChatSyntax s;
    s.format = c.format;
    ChatReplyReader stream(s);
    std::vector<std::string> pieces;  // the arguments of each delta
    std::string name;
    auto collect = [&](const std::vector<json>& deltas) {
      for (const json& d : deltas) {
        for (const json& t : d.value("tool_calls", json::array())) {
          if (t["function"].contains("name")) name = t["function"]["name"];
          pieces.push_back(t["function"].value("arguments", ""));
        }
      }
    };
    for (char ch : c.reply) collect(stream.Feed(std::string(1, ch)));
    collect(stream.Finish());
    EXPECT_EQ(name, "get_weather");
    std::string args;
    size_t num_growing = 0;
    for (const std::string& p : pieces) {
      args += p;
      num_growing += p.empty() ? 0 : 1;
    }
    EXPECT_EQ(args, R"({"city":"Paris","days":3})");
    EXPECT_GT(num_growing, 10u) << "arguments came in " << num_growing
                                << " pieces";
  }
}

// A call cut by the token limit: stream and whole reply both report it as
// far as it got, with finish_reason "length" (OpenAI's shape).
TEST(ChatReplyReaderTest, ACallCutByTheLimitIsReportedAsFarAsItGot) {
  chat::ChatSyntax s;
  s.format = chat::ToolCallFormat::kHermes;
  const std::string reply =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa";
  ChatReplyReader whole(s);
  const json m = whole.Message(reply, /*cut_off=*/true);
  ASSERT_TRUE(m.contains("tool_calls")) << m.dump();
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Pa)");
  EXPECT_TRUE(m["content"].is_null());
  // Not cut: the unfinished block is text.
  ChatReplyReader plain(s);
  EXPECT_EQ(plain.Message(reply)["content"], reply);
  ChatReplyReader stream(s);
  std::string args;
  for (const auto& deltas : {stream.Feed(reply), stream.Finish(true)}) {
    for (const json& d : deltas) {
      EXPECT_FALSE(d.contains("content")) << d.dump();
      for (const json& t : d.value("tool_calls", json::array())) {
        args += t["function"].value("arguments", "");
      }
    }
  }
  EXPECT_EQ(args, R"({"city":"Pa)");
  EXPECT_EQ(ChatFinishReason("length", stream.has_tool_calls()), "length");
}

}  // namespace
}  // namespace kvault
