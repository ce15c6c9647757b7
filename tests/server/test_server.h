// An in-process kvault server for the HTTP tests: a real Engine over a
// model, an HttpServer on a free 127.0.0.1 port, a slot-save directory,
// and an httplib::Client talking to it.
#ifndef KVAULT_TESTS_SERVER_TEST_SERVER_H_
#define KVAULT_TESTS_SERVER_TEST_SERVER_H_

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/http_server.h"
#include "server_test_util.h"

namespace kvault {

// Returns the real model, or null when the file is missing.
inline std::unique_ptr<LlamaModel> LoadStoriesOrNull() {
  if (!std::ifstream(StoriesModelPath())) return nullptr;
  auto model = LlamaModel::Load(StoriesModelPath());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

// Returns a fresh empty directory under the temp dir.
inline std::string MakeTempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "kvault_http_XXXXXX").string();
  char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

class TestServer {
 public:
  // Returns the default engine options of the tests: 1024 cells, 2 slots.
  static EngineOptions DefaultEngineOptions() {
    EngineOptions eo;
    eo.n_ctx_total = 1024;
    eo.n_slots = 2;
    eo.num_threads = 1;
    return eo;
  }

  // Starts an engine over `model` with `eo` and a server with `options`
  // (port forced to 0; slot_save_path "auto" becomes a temp dir).
  TestServer(std::unique_ptr<LlamaModel> model, ServerOptions options,
             const EngineOptions& eo = DefaultEngineOptions()) {
    auto engine = Engine::Create(std::move(model), eo);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return;
    engine_ = std::move(engine).value();
    if (options.slot_save_path == "auto") {
      options.slot_save_path = dir_ = MakeTempDir();
    }
    options.port = 0;
    auto server = HttpServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return;
    server_ = std::move(server).value();
    server_->SetEngine(engine_.get());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
  }
  ~TestServer() {
    client_.reset();
    if (server_) server_->Stop();
    if (engine_) engine_->Shutdown();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  bool ok() const { return server_ != nullptr; }
  httplib::Client& client() { return *client_; }
  Engine& engine() { return *engine_; }
  HttpServer& server() { return *server_; }
  const std::string& dir() const { return dir_; }

  // POSTs `body` to `path`; returns {status, parsed body or null}.
  std::pair<int, nlohmann::json> Post(const std::string& path,
                                      const nlohmann::json& body) {
    return PostRaw(path, body.dump());
  }
  std::pair<int, nlohmann::json> PostRaw(const std::string& path,
                                         const std::string& body) {
    auto res = client_->Post(path.c_str(), body, "application/json");
    if (!res) {
      ADD_FAILURE() << "POST " << path << ": "
                    << httplib::to_string(res.error());
      return {0, nullptr};
    }
    return {res->status, Parse(res->body)};
  }
  std::pair<int, nlohmann::json> Get(const std::string& path) {
    auto res = client_->Get(path.c_str());
    if (!res) {
      ADD_FAILURE() << "GET " << path << ": "
                    << httplib::to_string(res.error());
      return {0, nullptr};
    }
    return {res->status, Parse(res->body)};
  }

  static nlohmann::json Parse(const std::string& text) {
    return nlohmann::json::parse(text, nullptr, false);
  }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::string dir_;
};

// Returns the JSON payloads of an SSE body ("[DONE]" kept as a string);
// fails the test on a framing error.
inline std::vector<std::string> SsePayloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    EXPECT_EQ(body.compare(pos, 6, "data: "), 0) << body.substr(pos, 80);
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated SSE event: " << body.substr(pos, 80);
      break;
    }
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

// A test against a real server over stories260K (skipped when the model
// file is missing); Options() may change the server's options.
class StoriesServerTest : public testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadStoriesOrNull();
    if (model == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
    ServerOptions o = Options();
    o.model_path = StoriesModelPath();
    server_ = std::make_unique<TestServer>(std::move(model), o);
    ASSERT_TRUE(server_->ok());
  }
  virtual ServerOptions Options() const { return ServerOptions(); }
  TestServer& s() { return *server_; }

  // POSTs `body` with "stream": true; returns the SSE payloads ("[DONE]"
  // kept), failing the test unless the answer is a 200.
  std::vector<std::string> StreamPayloads(const std::string& path,
                                          nlohmann::json body) {
    body["stream"] = true;
    auto res =
        s().client().Post(path.c_str(), body.dump(), "application/json");
    if (!res) {
      ADD_FAILURE() << "POST " << path << ": "
                    << httplib::to_string(res.error());
      return {};
    }
    EXPECT_EQ(res->status, 200) << res->body;
    return SsePayloads(res->body);
  }

  std::unique_ptr<TestServer> server_;
};

// Expects an error reply with `status`, `type` and `reason`.
inline void ExpectError(const std::pair<int, nlohmann::json>& reply, int status,
                        const std::string& type, const std::string& reason) {
  SCOPED_TRACE(reply.second.dump());
  EXPECT_EQ(reply.first, status);
  ASSERT_TRUE(reply.second.is_object());
  EXPECT_EQ(reply.second["error"]["code"], status);
  EXPECT_EQ(reply.second["error"]["type"], type);
  EXPECT_TRUE(reply.second["error"]["message"].is_string());
  EXPECT_EQ(reply.second["reason"], reason);
}

}  // namespace kvault

#endif  // KVAULT_TESTS_SERVER_TEST_SERVER_H_
