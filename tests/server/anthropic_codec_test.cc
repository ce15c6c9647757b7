#include "server/anthropic_codec.h"

#include <gtest/gtest.h>

#include "server_test_util.h"

namespace kvault {
namespace {

using nlohmann::json;

class AnthropicCodecTest : public testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel();
    ASSERT_NE(model_, nullptr);
    limits_.defaults.n_predict = 50;
    limits_.n_ctx_slot = 400;
    limits_.n_slots = 1;
    ctx_.id = "msg_7";
    ctx_.model = "m.gguf";
    ctx_.prompt_tokens = 12;
  }
  const Tokenizer& tok() const { return model_->tokenizer(); }
  StatusOr<AnthropicRequest> Parse(const json& body) {
    return ParseAnthropicRequest(body, tok(), limits_,
                                 ChatTemplateFamily::kChatml);
  }
  std::vector<ChatMessage> Messages(const json& body) {
    std::vector<std::string> tools;
    auto m = AnthropicChatMessages(body, &tools);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : std::vector<ChatMessage>{};
  }
  std::string Error(const json& body) {
    auto r = Parse(body);
    return r.ok() ? "ok"
                  : std::string(r.status().reason()) + ": " +
                        std::string(r.status().message());
  }

  std::unique_ptr<LlamaModel> model_;
  CompletionLimits limits_;
  AnthropicContext ctx_;
};

json User(json content) {
  return json::array({{{"role", "user"}, {"content", std::move(content)}}});
}

TEST_F(AnthropicCodecTest, SamplingFieldsMapToParams) {
  auto r = Parse({{"max_tokens", 7},
                  {"temperature", 0.5},
                  {"top_p", 0.9},
                  {"top_k", 3},
                  {"stream", true},
                  {"stop_sequences", {"END"}},
                  {"metadata", {{"user_id", "u"}}},
                  {"thinking", {{"type", "enabled"}, {"budget_tokens", 9}}},
                  {"messages", User("Hi")}});
  ASSERT_TRUE(r.ok()) << r.status();
  const CompletionParams& p = r->completion.params;
  EXPECT_EQ(p.n_predict, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 3);
  EXPECT_TRUE(r->completion.stream);
  EXPECT_EQ(r->stop_sequences, std::vector<std::string>{"END"});
  EXPECT_EQ(p.stop.front(), "END");  // then chatml's end-of-turn text
  EXPECT_EQ(p.prompt,
            tok().Tokenize("<|im_start|>user\nHi<|im_end|>\n"
                           "<|im_start|>assistant\n",
                           true, true));
}

TEST_F(AnthropicCodecTest, SystemAndBlocksRender) {
  auto m = Messages(
      {{"system", json::array({{{"type", "text"}, {"text", "A"}},
                               {{"type", "text"}, {"text", "B"}}})},
       {"messages",
        {{{"role", "user"},
          {"content", json::array({{{"type", "text"}, {"text", "x"}},
                                   {{"type", "text"}, {"text", "y"}}})}},
         {{"role", "assistant"},
          {"content",
           json::array({{{"type", "thinking"}, {"thinking", "hmm"}},
                        {{"type", "tool_use"},
                         {"id", "t1"},
                         {"name", "f"},
                         {"input", {{"a", 1}}}}})}},
         {{"role", "user"},
          {"content", json::array({{{"type", "tool_result"},
                                    {"tool_use_id", "t1"},
                                    {"is_error", true},
                                    {"content", "bad"}}})}}}}});
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "A\nB");
  EXPECT_EQ(m[1].content, "x\ny");
  EXPECT_EQ(m[2].content, R"({"tool_call":{"input":{"a":1},"name":"f"}})");
  EXPECT_EQ(m[3].content, "Tool error (t1): bad");
}

TEST_F(AnthropicCodecTest, EmptyMessagesIsOneEmptyUserTurn) {
  auto m = Messages({{"messages", json::array()}});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[0].content, "");
}

TEST_F(AnthropicCodecTest, ToolsGoToSystemTurnUnlessNone) {
  json tools = json::array({{{"name", "get"},
                             {"description", "d"},
                             {"input_schema", {{"type", "object"}}}}});
  std::vector<std::string> names;
  auto m = AnthropicChatMessages(
      {{"tools", tools}, {"messages", User("Hi")}}, &names);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(names, std::vector<std::string>{"get"});
  EXPECT_NE((*m)[0].content.find(R"({"description":"d","input_schema")"),
            std::string::npos);
  names.clear();
  m = AnthropicChatMessages({{"tools", tools},
                             {"tool_choice", {{"type", "none"}}},
                             {"messages", User("Hi")}},
                            &names);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(m->size(), 1u);
}

TEST_F(AnthropicCodecTest, ErrorsNameTheField) {
  EXPECT_EQ(Error({{"max_tokens", 5}}),
            "missing_field: field 'messages' is required");
  EXPECT_EQ(Error({{"messages", User("Hi")}, {"container", "c"}}),
            "unsupported_field: field 'container' is not supported: kvault "
            "runs no code-execution containers");
  EXPECT_EQ(Error({{"messages", User("Hi")},
                   {"tool_choice", {{"type", "any"}}}}),
            "unsupported_field: field 'tool_choice.type': \"any\" is not "
            "supported (kvault cannot force a tool call); supported: auto, "
            "none");
  EXPECT_EQ(Error({{"messages", User(json::array({{{"type", "document"}}}))}}),
            "unsupported_content: field 'messages[0].content[0].type': "
            "\"document\" blocks are not supported here (supported: text, "
            "image, tool_result)");
  EXPECT_EQ(Error({{"messages", {{{"role", "system"}, {"content", "x"}}}}}),
            "unknown_role: field 'messages[0].role': expected \"user\" or "
            "\"assistant\", got \"system\"");
  EXPECT_EQ(Error({{"messages", User("Hi")}, {"stop_sequences", "END"}}),
            "invalid_field: field 'stop_sequences': expected an array of "
            "strings, got string \"END\"");
  EXPECT_EQ(Error({{"messages", User("Hi")},
                   {"tools", {{{"type", "web_search_20250305"},
                               {"name", "w"}}}}}),
            "unsupported_field: field 'tools[0].type' is not supported: "
            "\"web_search_20250305\" is a server tool; kvault runs only "
            "client tools");
}

TEST_F(AnthropicCodecTest, ImageIsLlamaServers500) {
  json image = {{"type", "image"}, {"source", {{"type", "base64"}}}};
  auto r = Parse({{"messages", User(json::array({image}))}});
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), kImageNotSupported);
  json result = {{"type", "tool_result"},
                 {"tool_use_id", "t"},
                 {"content", json::array({image})}};
  r = Parse({{"messages", User(json::array({result}))}});
  EXPECT_EQ(r.status().reason(), "image_not_supported");
}

TEST_F(AnthropicCodecTest, CountTokensIsThePromptLength) {
  json body = {{"messages", User("Hi")}};
  auto n = AnthropicCountTokens(body, tok(), ChatTemplateFamily::kChatml);
  ASSERT_TRUE(n.ok());
  auto r = Parse(body);
  EXPECT_EQ(*n, json({{"input_tokens", r->completion.params.prompt.size()}}));
}

TEST_F(AnthropicCodecTest, ToolCallParsing) {
  const std::vector<std::string> names = {"get"};
  auto call =
      ParseToolCall(R"( {"tool_call": {"name": "get", "input": {"a": 1}}} )",
                    names);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(*call, json({{"name", "get"}, {"input", {{"a", 1}}}}));
  EXPECT_FALSE(ParseToolCall(R"({"tool_call": {"name": "other"}})", names));
  EXPECT_FALSE(ParseToolCall(R"({"tool_call": {"name": "get"}} x)", names));
  EXPECT_FALSE(ParseToolCall(R"({"tool_call": {"name": "get"}})", {}));
}

CompletionResult Result(std::string content, std::string stop_type) {
  CompletionResult r;
  r.content = std::move(content);
  r.stop_type = std::move(stop_type);
  r.tokens_evaluated = 12;
  r.tokens_predicted = 3;
  r.timings.cache_n = 10;
  return r;
}

TEST_F(AnthropicCodecTest, MessageJson) {
  json j = AnthropicMessageJson(Result("hey", "limit"), ctx_);
  EXPECT_EQ(j, json::parse(R"({"id":"msg_7","type":"message",
    "role":"assistant","content":[{"type":"text","text":"hey"}],
    "model":"m.gguf","stop_reason":"max_tokens","stop_sequence":null,
    "usage":{"cache_read_input_tokens":10,"input_tokens":2,
             "output_tokens":3}})"));
  ctx_.stop_sequences = {"END"};
  CompletionResult word = Result("a", "word");
  word.stopping_word = "END";
  j = AnthropicMessageJson(word, ctx_);
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "END");
  ctx_.tool_names = {"get"};
  j = AnthropicMessageJson(
      Result(R"({"tool_call":{"name":"get","input":{}}})", "eos"), ctx_);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_EQ(j["content"][0], json::parse(R"({"type":"tool_use",
    "id":"toolu_msg_7_0","name":"get","input":{}})"));
}

// Returns the data objects of an SSE text, checking each event's name.
std::vector<json> Events(const std::string& sse) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t nl = sse.find('\n', pos);
    const std::string name = sse.substr(pos + 7, nl - pos - 7);
    const size_t end = sse.find("\n\n", nl);
    out.push_back(json::parse(sse.substr(nl + 7, end - nl - 7)));
    EXPECT_EQ(out.back()["type"], name);
    pos = end;
  }
  return out;
}

std::vector<std::string> Types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) out.push_back(e["type"]);
  return out;
}

TEST_F(AnthropicCodecTest, StreamTextSequence) {
  AnthropicStreamFormatter f(ctx_);
  TokenEvent t;
  t.text = "he";
  std::string sse = f.Token(t, 0);
  t.text = "";
  sse += f.Token(t, 0);
  sse += f.Done(Result("hey", "eos"));
  auto events = Events(sse);
  EXPECT_EQ(Types(events),
            (std::vector<std::string>{
                "message_start", "content_block_start", "content_block_delta",
                "content_block_delta", "content_block_stop", "message_delta",
                "message_stop"}));
  EXPECT_EQ(events[0]["message"]["usage"]["input_tokens"], 12);
  EXPECT_EQ(events[3]["delta"]["text"], "y");
  EXPECT_EQ(events[4]["index"], 0);
  EXPECT_EQ(events[5]["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(events[5]["usage"]["output_tokens"], 3);
}

TEST_F(AnthropicCodecTest, StreamHoldsAToolCallAndSendsToolUse) {
  ctx_.tool_names = {"get"};
  AnthropicStreamFormatter f(ctx_);
  const std::string text = R"({"tool_call":{"name":"get","input":{"a":1}}})";
  TokenEvent t;
  t.text = text.substr(0, 5);
  EXPECT_EQ(Types(Events(f.Token(t, 0))),
            std::vector<std::string>{"message_start"});
  auto events = Events(f.Done(Result(text, "eos")));
  EXPECT_EQ(Types(events),
            (std::vector<std::string>{"content_block_start",
                                      "content_block_delta",
                                      "content_block_stop", "message_delta",
                                      "message_stop"}));
  EXPECT_EQ(events[0]["content_block"]["type"], "tool_use");
  EXPECT_EQ(events[1]["delta"]["partial_json"], R"({"a":1})");
  EXPECT_EQ(events[3]["delta"]["stop_reason"], "tool_use");
}

}  // namespace
}  // namespace kvault
