// CORS over a running server: preflights on any path before the API key,
// Access-Control-* headers on ordinary answers, --cors-origins localhost.
#include <gtest/gtest.h>

#include "test_server.h"

namespace kvault {
namespace {

std::unique_ptr<TestServer> StartWith(ServerOptions o) {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) return nullptr;
  return std::make_unique<TestServer>(std::move(model), o);
}

httplib::Result Preflight(TestServer& s, const std::string& path,
                          const std::string& origin) {
  return s.client().Options(
      path.c_str(), {{"Origin", origin},
                     {"Access-Control-Request-Method", "POST"},
                     {"Access-Control-Request-Headers", "Authorization"}});
}

TEST(HttpServerCorsTest, PreflightSkipsTheApiKeyOnAnyPath) {
  ServerOptions o;
  o.api_keys = {"s3cret"};
  auto s = StartWith(o);
  if (s == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  for (const char* path : {"/completions", "/no/such/route"}) {
    auto res = Preflight(*s, path, "web.mydomain.fr");
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"),
              "web.mydomain.fr");
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Credentials"),
              "true");
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Methods"),
              "GET, POST, DELETE, OPTIONS");
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"), "*");
  }
}

TEST(HttpServerCorsTest, OrdinaryAnswersAndErrorsNameTheOrigin) {
  auto s = StartWith(ServerOptions());
  if (s == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  auto ok = s->client().Get("/health", {{"Origin", "http://x.example"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"),
            "http://x.example");
  auto missing = s->client().Get("/nope", {{"Origin", "http://x.example"}});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("Access-Control-Allow-Origin"),
            "http://x.example");
  auto no_origin = s->client().Get("/health");
  ASSERT_TRUE(no_origin);
  EXPECT_FALSE(no_origin->has_header("Access-Control-Allow-Origin"));
}

TEST(HttpServerCorsTest, LocalhostModeReflectsOnlyLocalOrigins) {
  ServerOptions o;
  o.cors.origins = {"localhost"};
  o.cors.methods = "GET";
  auto s = StartWith(o);
  if (s == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  auto local = Preflight(*s, "/completions", "http://127.0.0.1:3000");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->get_header_value("Access-Control-Allow-Origin"),
            "http://127.0.0.1:3000");
  EXPECT_EQ(local->get_header_value("Access-Control-Allow-Methods"), "GET");
  auto evil = Preflight(*s, "/completions", "http://localhost.evil.com");
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->status, 200);
  EXPECT_FALSE(evil->has_header("Access-Control-Allow-Origin"));
}

TEST(HttpServerCorsTest, MetricsCarryTheProcessStartTime) {
  ServerOptions o;
  o.metrics_endpoint = true;
  auto s = StartWith(o);
  if (s == nullptr) GTEST_SKIP() << "missing " << StoriesModelPath();
  const int64_t before = static_cast<int64_t>(std::time(nullptr));
  auto res = s->client().Get("/metrics");
  ASSERT_TRUE(res);
  const std::string started = res->get_header_value("Process-Start-Time-Unix");
  ASSERT_FALSE(started.empty());
  EXPECT_LE(std::stoll(started), before);
  EXPECT_GT(std::stoll(started), before - 600);
}

}  // namespace
}  // namespace kvault
