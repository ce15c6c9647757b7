// End to end: the embedded default model (stories260K) writes TinyStories
// text from the first command; the web UI's page and assets are served from
// the binary (content types, ETag revalidation, no key needed, nothing but
// the embedded names reachable), --no-webui turns them off, and /kv's
// fields for the UI's map.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <string>

#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;

// Counts the runs of two or more ASCII letters in `text` (words).
int CountWords(const std::string& text) {
  static const std::regex kWord("[A-Za-z]{2,}");
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), kWord),
                    std::sregex_iterator()));
}

TEST(WebUiRoutesE2eTest, DefaultModelIsTinyStoriesAndWritesText) {
  auto p = ServerProcess::Start({"-np", "1", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NE((*p)->Log().find("serving stories260K"), std::string::npos);
  EXPECT_NE((*p)->Log().find("TinyStories"), std::string::npos);
  HttpClient client((*p)->port());
  Reply props = client.Get("/props");
  ASSERT_EQ(props.status, 200) << props.raw;
  EXPECT_EQ(props.body["demo_model"], false);
  EXPECT_EQ(props.body["model_path"], "stories260K.gguf");
  EXPECT_NE(props.body["model_label"].get<std::string>().find("TinyStories"),
            std::string::npos);
  Reply done = client.Post(
      "/completion",
      {{"prompt", "Once upon a time"}, {"n_predict", 32}, {"temperature", 0}});
  ASSERT_EQ(done.status, 200) << done.raw;
  const std::string text = done.body["content"];
  EXPECT_GE(CountWords(text), 8) << text;
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

TEST(WebUiRoutesE2eTest, DemoRandomCannotGoWithAModelFile) {
  auto p = ServerProcess::Start({"--demo-random", "-m", "x.gguf"}, 30);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().ToString().find("--demo-random"), std::string::npos);
}

class WebUiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("webui");
    auto p = ServerProcess::Start({"--demo-random", "-np", "2", "-c", "256",
                                   "-t", "1", "--api-key", "sesame",
                                   "--slot-save-path", dir_});
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = std::move(*p);
  }
  void TearDown() override {
    if (server_) EXPECT_EQ(StopServer(server_.get()), "exit 0");
  }
  httplib::Result Get(const std::string& path,
                      const httplib::Headers& headers = {}) {
    httplib::Client c("127.0.0.1", server_->port());
    return c.Get(path, headers);
  }
  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(WebUiServerTest, PageAndAssetsAreServedWithoutTheKey) {
  struct Want {
    const char* path;
    const char* type;
    const char* text;
  };
  for (const Want& w :
       {Want{"/", "text/html; charset=utf-8", "<title>kvault</title>"},
        Want{"/index.html", "text/html; charset=utf-8", "app.js"},
        Want{"/app.js", "text/javascript; charset=utf-8", "import"},
        Want{"/style.css", "text/css; charset=utf-8", "--bg"},
        Want{"/favicon.svg", "image/svg+xml", "<svg"}}) {
    SCOPED_TRACE(w.path);
    auto r = Get(w.path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), w.type);
    EXPECT_NE(r->body.find(w.text), std::string::npos);
    const std::string etag = r->get_header_value("ETag");
    ASSERT_FALSE(etag.empty());
    auto again = Get(w.path, {{"If-None-Match", etag}});
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 304);
    EXPECT_TRUE(again->body.empty());
  }
  // The API still wants the key.
  auto props = Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(props->status, 401);
}

// A browser reuses its connection after a refused request (401, 404): the
// next request on it must be answered for itself.
TEST_F(WebUiServerTest, KeepAliveConnectionServesAfterARefusal) {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_keep_alive(true);
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  struct Step {
    const char* path;
    bool with_key;
    int status;
  };
  for (const Step& s :
       {Step{"/props", false, 401}, Step{"/favicon.svg", false, 200},
        Step{"/nothing", false, 404}, Step{"/props", true, 200},
        Step{"/props", false, 401}, Step{"/slots", true, 200}}) {
    SCOPED_TRACE(s.path);
    auto r = s.with_key ? c.Get(s.path, key) : c.Get(s.path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, s.status) << r->body;
  }
}

TEST_F(WebUiServerTest, OnlyEmbeddedNamesAreReachable) {
  for (const char* path :
       {"/../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/app.js/..",
        "/webui/index.html", "/nothing.js", "/index.htm", "/app.js%00.css",
        "/.%2fapp.js", "//app.js"}) {
    SCOPED_TRACE(path);
    auto r = Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r->body;
    EXPECT_EQ(body["error"]["type"], "not_found_error");
  }
  httplib::Client c("127.0.0.1", server_->port());
  auto post = c.Post("/", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

TEST_F(WebUiServerTest, KvReportsTiersSharedPagesAndTheLastEvent) {
  HttpClient c(server_->port(), "sesame");
  Reply kv = c.Get("/kv");
  ASSERT_EQ(kv.status, 200) << kv.raw;
  for (const char* field :
       {"pool", "page_size", "num_pages", "page_slot", "map"}) {
    EXPECT_TRUE(kv.body.contains(field)) << field;  // the original answer
  }
  EXPECT_TRUE(kv.body["shared_pages"].is_array());
  ASSERT_TRUE(kv.body["tiers"].is_array());
  ASSERT_FALSE(kv.body["tiers"].empty());  // the default RAM spill tier
  EXPECT_EQ(kv.body["tiers"][0]["kind"], "spill");
  EXPECT_TRUE(kv.body["last_event"].is_null());
  ASSERT_EQ(
      c.Post("/completion", {{"prompt", "hello"}, {"n_predict", 4}}).status,
      200);
  Reply erased = c.Post("/slots/0?action=erase", json::object());
  ASSERT_EQ(erased.status, 200) << erased.raw;
  kv = c.Get("/kv");
  EXPECT_EQ(kv.body["last_event"]["action"], "erase");
  EXPECT_EQ(kv.body["last_event"]["id_slot"], 0);
  EXPECT_EQ(kv.body["last_event"]["seq"], 1);
  EXPECT_TRUE(kv.body["shared_pages"].empty());
}

TEST_F(WebUiServerTest, KvMarksThePagesTwoSlotsShare) {
  HttpClient c(server_->port(), "sesame");
  // 60 bytes (byte vocabulary: 60 tokens, 3 whole pages of 16): slot 1
  // reuses slot 0's whole pages of the same prompt instead of copying them.
  const std::string prompt(60, 'a');
  for (int slot : {0, 1}) {
    Reply r = c.Post("/completion",
                     {{"prompt", prompt}, {"n_predict", 2}, {"id_slot", slot}});
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  Reply kv = c.Get("/kv");
  ASSERT_EQ(kv.status, 200) << kv.raw;
  const json& shared = kv.body["shared_pages"];
  ASSERT_GE(shared.size(), 2u) << kv.raw;
  for (const json& page : shared) {
    EXPECT_EQ(kv.body["page_slot"][page.get<size_t>()], 0);  // the lowest
  }
}

TEST(WebUiRoutesE2eTest, NoWebUiLeavesTheApiAlone) {
  auto p = ServerProcess::Start(
      {"--demo-random", "--no-webui", "-np", "1", "-c", "256", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  HttpClient client((*p)->port());
  Reply root = client.Get("/");
  EXPECT_EQ(root.status, 404);
  EXPECT_EQ(root.body["error"]["type"], "not_found_error");
  EXPECT_EQ(client.Get("/app.js").status, 404);
  Reply props = client.Get("/props");
  ASSERT_EQ(props.status, 200);
  EXPECT_EQ(props.body["webui"], false);
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

}  // namespace
}  // namespace kvault::e2e
