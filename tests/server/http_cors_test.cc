// CORS rules: origin matching, preflight answers, --cors-origins parsing.
#include "server/http_cors.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

CorsOptions Localhost() {
  CorsOptions c;
  c.origins = {"localhost"};
  return c;
}

TEST(HttpCorsTest, LocalhostOriginsAreRecognised) {
  for (const char* o : {"http://localhost", "http://localhost:8080",
                        "https://127.0.0.1", "http://127.0.0.1:3000",
                        "http://[::1]", "http://[::1]:3000"}) {
    EXPECT_TRUE(IsLocalhostOrigin(o)) << o;
  }
  for (const char* o : {"localhost", "http://notlocalhost",
                        "http://localhost.evil.com", "http://evil.com",
                        "ftp://localhost", "http://localhost:80/x",
                        "http://localhost:", "http://127.0.0.10"}) {
    EXPECT_FALSE(IsLocalhostOrigin(o)) << o;
  }
}

TEST(HttpCorsTest, AnyOriginIsEchoedWithCredentials) {
  CorsOptions c;
  EXPECT_EQ(CorsAllowOrigin(c, "web.mydomain.fr"), "web.mydomain.fr");
  EXPECT_EQ(CorsAllowOrigin(c, ""), std::nullopt);
  c.credentials = false;
  EXPECT_EQ(CorsAllowOrigin(c, "http://a.b"), "*");
}

TEST(HttpCorsTest, LocalhostModeReflectsOnlyLocalOrigins) {
  EXPECT_EQ(CorsAllowOrigin(Localhost(), "http://[::1]:3000"),
            "http://[::1]:3000");
  EXPECT_EQ(CorsAllowOrigin(Localhost(), "http://evil.com"), std::nullopt);
}

TEST(HttpCorsTest, ListedOriginsMatchExactly) {
  CorsOptions c;
  c.origins = ParseCorsOrigins(" https://a.example , http://b.example:81")
                  .value();
  ASSERT_EQ(c.origins.size(), 2u);
  EXPECT_EQ(CorsAllowOrigin(c, "https://a.example"), "https://a.example");
  EXPECT_EQ(CorsAllowOrigin(c, "http://b.example:81"), "http://b.example:81");
  EXPECT_EQ(CorsAllowOrigin(c, "http://b.example"), std::nullopt);
}

TEST(HttpCorsTest, BadOriginListsAreRefused) {
  EXPECT_FALSE(ParseCorsOrigins("").ok());
  EXPECT_FALSE(ParseCorsOrigins(" , ").ok());
  EXPECT_FALSE(ParseCorsOrigins("example.com").ok());
  EXPECT_FALSE(ParseCorsOrigins("http://a.example/path").ok());
  EXPECT_TRUE(ParseCorsOrigins("*").ok());
  EXPECT_TRUE(ParseCorsOrigins("localhost").ok());
}

TEST(HttpCorsTest, PreflightCarriesMethodsHeadersAndCredentials) {
  HttpResponse res;
  ReplyPreflight(CorsOptions(), "origin", res);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.Header("Access-Control-Allow-Origin"), "origin");
  EXPECT_EQ(res.Header("Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(res.Header("Access-Control-Allow-Methods"),
            "GET, POST, DELETE, OPTIONS");
  EXPECT_EQ(res.Header("Access-Control-Allow-Headers"), "*");
  EXPECT_TRUE(res.body.empty());
}

TEST(HttpCorsTest, RefusedOriginGetsNoAllowHeaders) {
  HttpResponse res;
  ReplyPreflight(Localhost(), "http://localhost.evil.com", res);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.Header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(res.Header("Access-Control-Allow-Credentials"), "");
}

}  // namespace
}  // namespace kvault
