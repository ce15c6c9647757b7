// End to end: start-up on the demo model, health, props, auth, limits,
// malformed input, OpenAI endpoints with SSE, a client hanging up, and a
// clean exit on SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

TEST(ServerE2eTest, DemoModelStartsLabelledAndStopsCleanly) {
  auto p = ServerProcess::Start(
      {"--demo-random", "-np", "2", "-c", "1024", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NE((*p)->Log().find("DEMO model"), std::string::npos);
  HttpClient client((*p)->port());
  Reply health = client.Get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  Reply props = client.Get("/props");
  ASSERT_EQ(props.status, 200) << props.raw;
  EXPECT_EQ(props.body["demo_model"], true);
  EXPECT_EQ(props.body["total_slots"], 2);
  Reply done = client.Post("/completion", {{"prompt", "hello"},
                                            {"n_predict", 8},
                                            {"temperature", 0}});
  ASSERT_EQ(done.status, 200) << done.raw;
  EXPECT_EQ(done.body["tokens_predicted"].get<int>() +
                (done.body["stop_type"] == "eos" ? 1 : 0) >= 1,
            true);
  Reply slots = client.Get("/slots");
  ASSERT_EQ(slots.status, 200);
  ASSERT_TRUE(slots.body.is_array());
  EXPECT_EQ(slots.body.size(), 2u);
  EXPECT_EQ(StopServer(p->get()), "exit 0");
  EXPECT_NE((*p)->Log().find("stopped"), std::string::npos);
}

class StoriesServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = SharedPath("models/stories260K.gguf");
    if (!FileExists(model)) GTEST_SKIP() << "missing " << model;
    auto p = ServerProcess::Start({"-m", model, "-np", "2", "-t", "1",
                                   "--api-key", "sesame"});
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = std::move(*p);
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(StopServer(server_.get()), "exit 0");
    }
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(StoriesServerTest, ApiKeyGuardsEverythingButHealth) {
  HttpClient anon(server_->port());
  HttpClient wrong(server_->port(), "open");
  HttpClient right(server_->port(), "sesame");
  EXPECT_EQ(anon.Get("/health").status, 200);
  for (const char* path : {"/props", "/slots", "/metrics", "/v1/models"}) {
    SCOPED_TRACE(path);
    Reply r = anon.Get(path);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.body["error"]["type"], "authentication_error");
    EXPECT_EQ(wrong.Get(path).status, 401);
    EXPECT_EQ(right.Get(path).status, 200);
  }
  EXPECT_EQ(anon.Post("/completion", {{"prompt", "x"}}).status, 401);
}

TEST_F(StoriesServerTest, BadRequestsGet400WithAMessageAndNoCrash) {
  HttpClient c(server_->port(), "sesame");
  const std::vector<std::string> bodies = {
      "{not json",
      R"({"prompt": 42})",
      R"({"prompt": "x", "n_predict": "many"})",
      R"({"prompt": "x", "temperature": [1]})",
      R"({"prompt": "x", "id_slot": 9})",
      R"({"prompt": [1, 2, 99999999]})",
      "{\"prompt\": \"bad \xff\xfe utf8\"}",
      R"({"prompt": "x", "stop": 3})",
  };
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body);
    Reply r = c.PostRaw("/completion", body);
    EXPECT_EQ(r.status, 400) << r.raw;
    ASSERT_TRUE(r.body.contains("error")) << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
    EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
  }
  // A prompt longer than the slot's context.
  json long_prompt = json::array();
  for (int i = 0; i < 5000; ++i) long_prompt.push_back(100);
  EXPECT_EQ(c.Post("/completion", {{"prompt", long_prompt}}).status, 400);
  // Still serving.
  EXPECT_EQ(c.Post("/completion", {{"prompt", "Hi"}, {"n_predict", 2}}).status,
            200);
}

TEST_F(StoriesServerTest, CompletionStreamsAndTokenizes) {
  HttpClient c(server_->port(), "sesame");
  const json req = {{"prompt", "Once upon a time"},
                    {"n_predict", 12},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"return_tokens", true}};
  Reply plain = c.Post("/completion", req);
  ASSERT_EQ(plain.status, 200) << plain.raw;
  json stream_req = req;
  stream_req["stream"] = true;
  StreamReply s = c.Stream("/completion", stream_req);
  ASSERT_EQ(s.status, 200);
  ASSERT_GE(s.events.size(), 2u);
  std::string text;
  for (const json& e : s.events) text += e.value("content", "");
  EXPECT_EQ(text, plain.body["content"]);
  EXPECT_EQ(s.events.back()["stop"], true);
  EXPECT_EQ(s.events.back()["stop_type"], "limit");
  EXPECT_EQ(plain.body["tokens"].size(), 12u);

  Reply tok = c.Post("/tokenize", {{"content", "Once upon a time"}});
  ASSERT_EQ(tok.status, 200);
  Reply detok = c.Post("/detokenize", {{"tokens", tok.body["tokens"]}});
  ASSERT_EQ(detok.status, 200);
  EXPECT_NE(detok.body["content"].get<std::string>().find("Once upon a time"),
            std::string::npos);
}

TEST_F(StoriesServerTest, OpenAiEndpointsStreamWithDoneMarker) {
  HttpClient c(server_->port(), "sesame");
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                     {"max_tokens", 8},
                     {"temperature", 0}};
  Reply r = c.Post("/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  json chat_stream = chat;
  chat_stream["stream"] = true;
  StreamReply s = c.Stream("/v1/chat/completions", chat_stream);
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done_marker) << s.raw;
  ASSERT_FALSE(s.events.empty());
  std::string text;
  for (const json& e : s.events) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) {
      text += delta["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, r.body["choices"][0]["message"]["content"]);
  EXPECT_NE(s.raw.rfind("data: [DONE]\n\n"), std::string::npos);

  json comp = {{"prompt", "Once"}, {"max_tokens", 6}, {"stream", true}};
  StreamReply cs = c.Stream("/v1/completions", comp);
  EXPECT_EQ(cs.status, 200);
  EXPECT_TRUE(cs.done_marker);
  Reply models = c.Get("/v1/models");
  EXPECT_EQ(models.body["object"], "list");
}

TEST_F(StoriesServerTest, ClientHangingUpMidStreamFreesItsSlot) {
  HttpClient c(server_->port(), "sesame");
  int seen = 0;
  StreamReply s = c.Stream("/completion",
                           {{"prompt", "Once upon a time"},
                            {"n_predict", 1500},
                            {"ignore_eos", true},
                            {"id_slot", 0},
                            {"stream", true}},
                           [&](const json&) { return ++seen < 3; });
  EXPECT_EQ(seen, 3);
  // The slot is free again: a request pinned to it completes, and the
  // abandoned request stopped long before its 1500 tokens.
  Reply next = c.Post("/completion", {{"prompt", "Hi"},
                                      {"n_predict", 4},
                                      {"id_slot", 0}});
  ASSERT_EQ(next.status, 200) << next.raw;
  Reply slots = c.Get("/slots");
  ASSERT_EQ(slots.status, 200);
  for (const json& slot : slots.body) EXPECT_EQ(slot["is_processing"], false);
  Reply metrics = c.Get("/metrics");
  const std::optional<double> predicted =
      MetricValue(metrics.raw, "llamacpp:tokens_predicted_total");
  ASSERT_TRUE(predicted.has_value()) << metrics.raw;
  EXPECT_LT(*predicted, 1500.0);
}

// A non-streamed request whose client hangs up is cancelled, as
// llama-server does: its slot frees long before the context would fill.
TEST_F(StoriesServerTest, ClientHangingUpOnAWaitingRequestFreesItsSlot) {
  HttpClient c(server_->port(), "sesame");
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"n_predict", -1},
           {"ignore_eos", true}, {"id_slot", 0}}.dump();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request =
      "POST /completion HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
      "sesame\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()),
            static_cast<ssize_t>(request.size()));
  // Wait (bounded) until the request occupies slot 0, then hang up.
  bool busy = false;
  for (int i = 0; i < 2000 && !busy; ++i) {
    Reply slots = c.Get("/slots");
    busy = slots.status == 200 && slots.body[0]["is_processing"] == true;
  }
  ASSERT_TRUE(busy);
  close(fd);
  Reply next = c.Post("/completion",
                      {{"prompt", "Hi"}, {"n_predict", 4}, {"id_slot", 0}});
  ASSERT_EQ(next.status, 200) << next.raw;
  Reply slots = c.Get("/slots");
  const int n_ctx = slots.body[0]["n_ctx"];
  Reply metrics = c.Get("/metrics");
  const std::optional<double> predicted =
      MetricValue(metrics.raw, "llamacpp:tokens_predicted_total");
  ASSERT_TRUE(predicted.has_value()) << metrics.raw;
  // The abandoned request stopped before filling its slot's context.
  EXPECT_LT(*predicted, n_ctx - 8);
}

}  // namespace
}  // namespace kvault::e2e
