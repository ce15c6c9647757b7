// A sleeping server (SetEngineHost): health, props, models and metrics
// answer without waking it; a completion wakes it; metrics counters carry
// over the reload and the throughput window is not reported twice.
#include <gtest/gtest.h>

#include <thread>

#include "server/engine_host.h"
#include "server/http_server.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

StatusOr<std::unique_ptr<Engine>> NewEngine() {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) return NotFoundError("no model");
  return Engine::Create(std::move(model), TestServer::DefaultEngineOptions());
}

class HttpServerSleepTest : public testing::Test {
 protected:
  void SetUp() override {
    auto first = NewEngine();
    if (!first.ok()) GTEST_SKIP() << "missing " << StoriesModelPath();
    host_ = std::make_unique<EngineHost>(std::move(first).value(), NewEngine,
                                         milliseconds(200));
    ServerOptions o;
    o.port = 0;
    o.metrics_endpoint = true;
    o.model_path = StoriesModelPath();
    auto server = HttpServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    server_->SetEngineHost(host_.get());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (host_) host_->Shutdown();
  }
  json Props() { return json::parse(client_->Get("/props")->body); }
  std::string Metrics() { return client_->Get("/metrics")->body; }
  bool WaitAsleep() {
    for (int i = 0; i < 300; ++i) {
      if (Props()["is_sleeping"] == true) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }
  int Complete(int n_predict) {
    json body{{"prompt", "Once"}, {"n_predict", n_predict}, {"ignore_eos", true}};
    return client_->Post("/completion", body.dump(), "application/json")
        ->status;
  }

  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerSleepTest, ReadsDoNotWakeAndGenerationDoes) {
  EXPECT_EQ(Props()["is_sleeping"], false);
  ASSERT_EQ(Complete(4), 200);
  Metrics();  // starts an empty throughput window
  const std::string awake = Metrics();
  ASSERT_TRUE(WaitAsleep());
  EXPECT_EQ(client_->Get("/health")->status, 200);
  json models = json::parse(client_->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "stories260K.gguf");
  EXPECT_EQ(Metrics(), awake);  // the snapshot taken on entering sleep
  EXPECT_TRUE(host_->sleeping());
  ASSERT_EQ(Complete(2), 200);
  EXPECT_EQ(Props()["is_sleeping"], false);
}

TEST_F(HttpServerSleepTest, CountersSurviveTheReload) {
  ASSERT_EQ(Complete(4), 200);
  ASSERT_TRUE(WaitAsleep());
  EXPECT_NE(Metrics().find("\nllamacpp:tokens_predicted_total 4\n"),
            std::string::npos);
  ASSERT_EQ(Complete(3), 200);
  const std::string text = Metrics();
  EXPECT_NE(text.find("\nllamacpp:tokens_predicted_total 7\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace kvault
