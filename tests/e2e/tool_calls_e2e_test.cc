// Tool calls and reasoning through the real server: a tiny model cannot
// call tools, so the test hook (KVAULT_TEST_HOOKS=1, request field
// "__kvault_scripted_output") makes the engine emit a given reply, and the
// chat route must read it back as OpenAI's message -- whole and streamed.
// A forced call (tool_choice "required") runs the real model under the
// tool-call grammar.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
    "properties": {"location": {"type": "string", "maxLength": 12}},
    "required": ["location"]}}}])");

const char kReply[] =
    "<think>The user wants weather.</think>Checking.\n<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
    "</tool_call>";

class ToolCallsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl =
        SharedPath("conformance/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    if (!FileExists(tmpl)) GTEST_SKIP() << "no ../shared chat templates";
    ::setenv("KVAULT_TEST_HOOKS", "1", 1);
    auto server = ServerProcess::Start(
        {"-m", SharedPath("models/stories260K.gguf"), "-np", "2",
         "--chat-template-file", tmpl});
    ::unsetenv("KVAULT_TEST_HOOKS");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  json Body(const std::string& scripted) const {
    json body{{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
              {"tools", kTools}};
    if (!scripted.empty()) body["__kvault_scripted_output"] = scripted;
    return body;
  }

  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ToolCallsE2eTest, ReplyIsReadBackAsToolCallsAndReasoning) {
  HttpClient client(server_->port());
  Reply r = client.Post("/v1/chat/completions", Body(kReply));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& m = choice["message"];
  EXPECT_EQ(m["content"], "Checking.");
  EXPECT_EQ(m["reasoning_content"], "The user wants weather.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
  const json& call = m["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json::parse(R"({"location": "Paris"})"));
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
}

TEST_F(ToolCallsE2eTest, StreamDeltasAddUpToTheSameMessage) {
  HttpClient client(server_->port());
  json body = Body(kReply);
  body["stream"] = true;
  StreamReply s = client.Stream("/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_TRUE(s.done_marker);
  std::string content, reasoning, name, args, id, finish;
  for (const json& e : s.events) {
    const json& c = e["choices"][0];
    if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    const json& d = c["delta"];
    if (d.contains("content") && d["content"].is_string()) content += d["content"];
    reasoning += d.value("reasoning_content", "");
    for (const json& t : d.value("tool_calls", json::array())) {
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) id = t["id"];
      name += t["function"].value("name", "");
      args += t["function"].value("arguments", "");
    }
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(reasoning, "The user wants weather.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(args), json::parse(R"({"location": "Paris"})"));
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ToolCallsE2eTest, ReasoningFormatNoneLeavesThoughtsInContent) {
  HttpClient client(server_->port());
  const std::string script = "<think>hmm</think>Sunny.";
  // The text the script's tokens spell (SentencePiece puts its space in
  // front, as with any text it tokenizes).
  Reply tok = client.Post("/tokenize", {{"content", script}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  Reply detok = client.Post("/detokenize", {{"tokens", tok.body["tokens"]}});
  ASSERT_EQ(detok.status, 200) << detok.raw;
  const std::string spelled = detok.body["content"];
  ASSERT_NE(spelled.find(script), std::string::npos) << spelled;
  json body = Body(script);
  body["reasoning_format"] = "none";
  Reply r = client.Post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], spelled);
  EXPECT_FALSE(r.body["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
}

// The real model under the tool-call grammar: every seed yields one call
// to the named tool whose arguments satisfy the schema.
TEST_F(ToolCallsE2eTest, RequiredToolChoiceForcesAValidCall) {
  HttpClient client(server_->port());
  for (int seed = 1; seed <= 5; ++seed) {
    json body = Body("");
    body["tool_choice"] = "required";
    body["seed"] = seed;
    body["max_tokens"] = 200;
    Reply r = client.Post("/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.raw;
    const json& m = r.body["choices"][0]["message"];
    ASSERT_EQ(m.value("tool_calls", json::array()).size(), 1u) << r.raw;
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    const json args = json::parse(
        m["tool_calls"][0]["function"]["arguments"].get<std::string>());
    ASSERT_TRUE(args.contains("location")) << args.dump();
    EXPECT_LE(args["location"].get<std::string>().size(), 12u * 4);
  }
}

// The token count endpoint counts the prompt the chat route runs: with
// tools rendered by the template.
TEST_F(ToolCallsE2eTest, InputTokensCountTheTools) {
  HttpClient client(server_->port());
  json plain = Body("");
  plain.erase("tools");
  Reply without = client.Post("/v1/chat/completions/input_tokens", plain);
  Reply with = client.Post("/v1/chat/completions/input_tokens", Body(""));
  ASSERT_EQ(without.status, 200) << without.raw;
  ASSERT_EQ(with.status, 200) << with.raw;
  EXPECT_GT(with.body["input_tokens"].get<int>(),
            without.body["input_tokens"].get<int>() + 20);
}

TEST_F(ToolCallsE2eTest, BadToolRequestsAreRefusedByName) {
  HttpClient client(server_->port());
  json named = Body("");
  named["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  Reply r = client.Post("/v1/chat/completions", named);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("nope"), std::string::npos) << r.raw;

  json with_grammar = Body("");
  with_grammar["tool_choice"] = "required";
  with_grammar["grammar"] = "root ::= \"x\"";
  r = client.Post("/v1/chat/completions", with_grammar);
  EXPECT_EQ(r.status, 400) << r.raw;

  json bad_tools = Body("");
  bad_tools["tools"] = json::array({{{"type", "function"}}});
  r = client.Post("/v1/chat/completions", bad_tools);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("tools[0]"), std::string::npos) << r.raw;

  r = client.Post("/v1/completions",
                  {{"prompt", "hi"}, {"tools", kTools}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("tools"), std::string::npos) << r.raw;
}

// /v1/responses: function tools, earlier calls and their outputs as input
// items, the reply as function_call items (whole and streamed).
json ResponsesBody(const std::string& scripted) {
  json body = json::parse(R"({"input": [
      {"role": "user", "content": "Weather in Paris?"},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather",
       "arguments": "{\"location\": \"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1",
       "output": "{\"temp\": 21}"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {
      "type": "object", "properties": {"location": {"type": "string"}},
      "required": ["location"]}}]})");
  body["__kvault_scripted_output"] = scripted;
  return body;
}

const char kRomeCall[] =
    "<think>Rome now.</think>Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"location\": \"Rome\"}}\n</tool_call>";

TEST_F(ToolCallsE2eTest, ResponsesApiReturnsFunctionCallItems) {
  HttpClient client(server_->port());
  Reply r = client.Post("/v1/responses", ResponsesBody(kRomeCall));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& output = r.body["output"];
  ASSERT_EQ(output.size(), 3u) << output.dump();
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"][0]["text"], "Rome now.");
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"][0]["text"], "Sure.");
  EXPECT_EQ(output[2]["type"], "function_call");
  EXPECT_EQ(output[2]["name"], "get_weather");
  EXPECT_EQ(json::parse(output[2]["arguments"].get<std::string>()),
            json::parse(R"({"location": "Rome"})"));
  EXPECT_FALSE(output[2]["call_id"].get<std::string>().empty());

  json hosted = ResponsesBody("");
  hosted["tools"] = json::array({{{"type", "web_search"}}});
  r = client.Post("/v1/responses", hosted);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("tools[0].type"), std::string::npos) << r.raw;
}

TEST_F(ToolCallsE2eTest, ResponsesStreamAnnouncesTheCall) {
  HttpClient client(server_->port());
  json body = ResponsesBody(kRomeCall);
  body["stream"] = true;
  StreamReply s = client.Stream("/v1/responses", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  std::string text, args, done_call_id, completed_call_id;
  for (const json& e : s.events) {
    const std::string type = e.value("type", "");
    if (type == "response.output_text.delta") text += e["delta"];
    if (type == "response.function_call_arguments.done") args = e["arguments"];
    if (type == "response.output_item.done" &&
        e["item"]["type"] == "function_call") {
      done_call_id = e["item"]["call_id"];
    }
    if (type == "response.completed") {
      for (const json& item : e["response"]["output"]) {
        if (item["type"] == "function_call") completed_call_id = item["call_id"];
      }
    }
  }
  EXPECT_EQ(text, "Sure.");
  EXPECT_EQ(json::parse(args), json::parse(R"({"location": "Rome"})"));
  EXPECT_FALSE(done_call_id.empty());
  EXPECT_EQ(done_call_id, completed_call_id);
}

}  // namespace
}  // namespace kvault::e2e
