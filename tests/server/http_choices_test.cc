// Several choices or prompts in one streamed request (issue 41 item 4):
// llama-server streams each task's events tagged with its index; kvault
// answered 400 ("streaming several prompts or choices is not supported").
#include <gtest/gtest.h>

#include <map>

#include "server/http_server.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;

using HttpChoicesTest = StoriesServerTest;

TEST_F(HttpChoicesTest, ChatStreamsEveryChoiceByIndex) {
  const json body = {
      {"messages", {{{"role", "user"}, {"content", "Tell a story"}}}},
      {"max_tokens", 12},
      {"n", 3},
      {"temperature", 1.0},
      {"seed", 11},
      {"stream_options", {{"include_usage", true}}}};
  std::vector<std::string> payloads = StreamPayloads("/v1/chat/completions", body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  payloads.pop_back();
  std::map<int, std::string> text;
  std::map<int, int> num_roles, num_finishes;
  std::string id;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    if (id.empty()) id = chunk["id"];
    EXPECT_EQ(chunk["id"], id) << "one response, one id";
    ASSERT_EQ(chunk["choices"].size(), 1u) << payloads[i];
    EXPECT_FALSE(chunk.contains("usage")) << "usage comes once, at the end";
    const json& c = chunk["choices"][0];
    const int index = c["index"];
    EXPECT_EQ(num_finishes[index], 0) << "nothing after a choice finished";
    const json& delta = c["delta"];
    if (delta.contains("role")) ++num_roles[index];
    if (delta.contains("content") && delta["content"].is_string()) {
      EXPECT_EQ(num_roles[index], 1) << "the role comes first";
      text[index] += delta["content"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) ++num_finishes[index];
  }
  for (int index : {0, 1, 2}) {
    EXPECT_EQ(num_roles[index], 1) << index;
    EXPECT_EQ(num_finishes[index], 1) << index;
  }
  EXPECT_EQ(num_roles.size(), 3u);
  const json usage = json::parse(payloads.back());
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["id"], id);
  // The same request whole: the same choices, the same summed usage.
  json whole_body = body;
  whole_body.erase("stream_options");
  auto [code, whole] = s().Post("/v1/chat/completions", whole_body);
  ASSERT_EQ(code, 200) << whole.dump();
  ASSERT_EQ(whole["choices"].size(), 3u);
  for (const json& c : whole["choices"]) {
    EXPECT_EQ(text[c["index"].get<int>()], c["message"]["content"]);
  }
  EXPECT_EQ(usage["usage"]["completion_tokens"],
            whole["usage"]["completion_tokens"]);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
}

TEST_F(HttpChoicesTest, CompletionPromptListStreamsEachPromptByIndex) {
  std::vector<std::string> payloads =
      StreamPayloads("/completion", {{"prompt", {"Once upon", "The dog"}},
                             {"n_predict", 6},
                             {"temperature", 0}});
  std::map<int, std::string> text;
  std::map<int, int> num_stops;
  for (const std::string& p : payloads) {
    ASSERT_NE(p, "[DONE]") << "llama-server's API has no terminator";
    const json event = json::parse(p);
    const int index = event["index"];
    EXPECT_EQ(num_stops[index], 0) << "nothing after the task's last event";
    text[index] += event["content"].get<std::string>();
    if (event["stop"] == true) ++num_stops[index];
  }
  EXPECT_EQ(num_stops, (std::map<int, int>{{0, 1}, {1, 1}}));
  for (int index : {0, 1}) {
    auto [code, one] = s().Post(
        "/completion", {{"prompt", index == 0 ? "Once upon" : "The dog"},
                        {"n_predict", 6},
                        {"temperature", 0}});
    ASSERT_EQ(code, 200);
    EXPECT_EQ(text[index], one["content"]) << index;
  }
}

TEST_F(HttpChoicesTest, TextCompletionsEndWithOneSummedUsage) {
  std::vector<std::string> payloads =
      StreamPayloads("/v1/completions", {{"prompt", "Once upon a time"},
                                 {"max_tokens", 5},
                                 {"n", 2},
                                 {"temperature", 0}});
  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  const json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  uint64_t completion_tokens = 0;
  std::map<int, int> num_finishes;
  for (size_t i = 0; i + 2 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    EXPECT_FALSE(chunk.contains("usage"));
    const json& c = chunk["choices"][0];
    if (!c["finish_reason"].is_null()) ++num_finishes[c["index"].get<int>()];
  }
  EXPECT_EQ(num_finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
  completion_tokens = usage["usage"]["completion_tokens"];
  auto [code, whole] = s().Post("/v1/completions", {{"prompt", "Once upon a time"},
                                                   {"max_tokens", 5},
                                                   {"n", 2},
                                                   {"temperature", 0}});
  ASSERT_EQ(code, 200);
  EXPECT_EQ(completion_tokens, whole["usage"]["completion_tokens"]);
  EXPECT_GT(completion_tokens, 2u);
}

}  // namespace
}  // namespace kvault
