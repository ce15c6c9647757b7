// In-process tests of the Anthropic (/v1/messages) and OpenAI Responses
// (/v1/responses) endpoints over a real engine and the stories260K model
// (skipped when the model file is missing).
#include <gtest/gtest.h>

#include "server/anthropic_codec.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;

class HttpCompatTest : public testing::Test {
 protected:
  void Start(std::vector<std::string> api_keys = {}) {
    auto model = LoadStoriesOrNull();
    if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
    ServerOptions o;
    o.model_path = StoriesModelPath();
    o.defaults.n_predict = 100;
    o.api_keys = std::move(api_keys);
    server_ = std::make_unique<TestServer>(std::move(model), o);
    ASSERT_TRUE(server_->ok());
  }
  TestServer& s() { return *server_; }

  // Returns the data objects of a streamed POST, skipping "event:" lines.
  std::vector<json> Stream(const std::string& path, const json& body) {
    auto res = s().client().Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200);
    std::vector<json> out;
    if (!res) return out;
    size_t pos = 0;
    while ((pos = res->body.find("data: ", pos)) != std::string::npos) {
      const size_t end = res->body.find("\n\n", pos);
      out.push_back(json::parse(res->body.substr(pos + 6, end - pos - 6)));
      pos = end;
    }
    return out;
  }

  std::unique_ptr<TestServer> server_;
};

json Hello(json extra = json::object()) {
  extra["temperature"] = 0;
  extra["messages"] = {{{"role", "user"}, {"content", "Hello"}}};
  return extra;
}

TEST_F(HttpCompatTest, MessagesMatchesChatCompletion) {
  Start();
  auto [code, msg] = s().Post("/v1/messages", Hello({{"max_tokens", 12}}));
  ASSERT_EQ(code, 200) << msg;
  auto [ccode, chat] =
      s().Post("/v1/chat/completions", Hello({{"max_tokens", 12}}));
  ASSERT_EQ(ccode, 200);
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["content"][0]["text"],
            chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(msg["stop_reason"], "max_tokens");
  EXPECT_EQ(msg["usage"]["output_tokens"], 12);
  EXPECT_EQ(msg["usage"]["input_tokens"].get<int>() +
                msg["usage"]["cache_read_input_tokens"].get<int>(),
            chat["usage"]["prompt_tokens"].get<int>());
  EXPECT_FALSE(msg.contains("timings"));
  auto [tcode, count] = s().Post("/v1/messages/count_tokens", Hello());
  EXPECT_EQ(tcode, 200);
  EXPECT_EQ(count["input_tokens"], chat["usage"]["prompt_tokens"]);
}

TEST_F(HttpCompatTest, MessagesStreamRebuildsTheText) {
  Start();
  auto [code, whole] = s().Post("/v1/messages", Hello({{"max_tokens", 10}}));
  ASSERT_EQ(code, 200);
  auto events = Stream("/v1/messages",
                       Hello({{"max_tokens", 10}, {"stream", true}}));
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.front()["type"], "message_start");
  EXPECT_EQ(events.back()["type"], "message_stop");
  std::string text;
  for (const json& e : events) {
    if (e["type"] == "content_block_delta") text += e["delta"]["text"];
  }
  EXPECT_EQ(text, whole["content"][0]["text"]);
  EXPECT_EQ(events[events.size() - 2]["delta"]["stop_reason"], "max_tokens");
}

TEST_F(HttpCompatTest, MessagesErrors) {
  Start();
  auto reply = s().Post("/v1/messages", json{{"max_tokens", 5}});
  ExpectError(reply, 400, "invalid_request_error", "missing_field");
  json image = Hello();
  image["messages"][0]["content"] = {{{"type", "image"}}};
  reply = s().Post("/v1/messages", image);
  ExpectError(reply, 500, "server_error", "image_not_supported");
  EXPECT_EQ(reply.second["error"]["message"], kImageNotSupported);
}

TEST_F(HttpCompatTest, ResponsesAndStream) {
  Start();
  json body = {{"input", "Hello"}, {"max_output_tokens", 8},
               {"temperature", 0}};
  auto [code, r] = s().Post("/v1/responses", body);
  ASSERT_EQ(code, 200) << r;
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["usage"]["output_tokens"], 8);
  body["stream"] = true;
  auto events = Stream("/responses", body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "response.completed");
  EXPECT_EQ(events.back()["response"]["output"][0]["content"][0]["text"],
            r["output"][0]["content"][0]["text"]);
}

// Regression (issue 41): llama-server's embeddings, rerank and LoRA
// endpoints were a bare 404 "File Not Found"; they say what is missing.
TEST_F(HttpCompatTest, AbsentFeaturesAreNamedNotMissing) {
  Start();
  for (const char* path : {"/v1/embeddings", "/embedding", "/rerank"}) {
    auto reply = s().Post(path, json{{"input", "hello"}});
    ExpectError(reply, 501, "not_supported_error", "embeddings_unsupported");
    EXPECT_NE(reply.second["error"]["message"].get<std::string>().find(
                  "--embeddings"),
              std::string::npos)
        << path;
  }
  auto [code, adapters] = s().Get("/lora-adapters");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(adapters, json::array());
}

TEST_F(HttpCompatTest, XApiKeyHeaderAuthenticates) {
  Start({"s3cret"});
  httplib::Headers good = {{"X-Api-Key", "s3cret"}};
  auto res = s().client().Post("/v1/messages/count_tokens", good,
                               Hello().dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  httplib::Headers bad = {{"X-Api-Key", "wrong"}};
  res = s().client().Post("/v1/messages/count_tokens", bad, Hello().dump(),
                          "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
}

}  // namespace
}  // namespace kvault
