// The strict HTTP/1.1 request parser: framing, header syntax, limits, and
// incremental feeding (one byte at a time gives the same result).
#include "server/http_request_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace kvault {
namespace {

HttpLimits SmallLimits() {
  HttpLimits l;
  l.max_head_bytes = 1024;
  l.max_headers = 8;
  l.max_body_bytes = 64;
  return l;
}

struct Parsed {
  Status status;  // OK when a whole request was parsed
  HttpRequestHead head;
  HttpRequest request;
  std::string rest;  // bytes left for the next request
};

// Feeds `bytes` in pieces of `step` bytes and parses one request.
Parsed ParseOne(const std::string& bytes, size_t step = 1 << 20) {
  HttpRequestParser parser(SmallLimits());
  Parsed out;
  bool have_head = false;
  for (size_t at = 0; at < bytes.size(); at += step) {
    parser.Append(std::string_view(bytes).substr(at, step));
    StatusOr<bool> r = have_head ? parser.ParseBody() : parser.ParseHead();
    if (r.ok() && *r && !have_head) {
      have_head = true;
      out.head = parser.head();
      r = parser.ParseBody();
    }
    if (!r.ok()) {
      out.status = r.status();
      return out;
    }
    if (have_head && *r) {
      out.request = parser.TakeRequest();
      // What follows (fed or not yet) belongs to the next request.
      out.rest = std::string(parser.pending()) +
                 bytes.substr(std::min(bytes.size(), at + step));
      return out;
    }
  }
  out.status = InvalidArgumentError("incomplete").WithReason("incomplete");
  return out;
}

// Expects `bytes` to fail with `reason` and HTTP `status`, whole and fed
// byte by byte.
void ExpectRejected(const std::string& bytes, const std::string& reason,
                    int status) {
  for (size_t step : {size_t{1} << 20, size_t{1}}) {
    SCOPED_TRACE("step " + std::to_string(step) + ": " + bytes);
    Parsed p = ParseOne(bytes, step);
    ASSERT_FALSE(p.status.ok());
    EXPECT_EQ(p.status.reason(), reason) << p.status;
    EXPECT_EQ(HttpErrorForParse(p.status).http_status, status);
  }
}

TEST(HttpRequestParserTest, SimpleGetWithQuery) {
  Parsed p = ParseOne(
      "GET /slots/1%2F?action=save&x=a+b%21 HTTP/1.1\r\nHost: h\r\n"
      "X-A:  v  \r\n\r\n");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.path, "/slots/1/");
  EXPECT_EQ(p.request.Param("action"), "save");
  EXPECT_EQ(p.request.Param("x"), "a b!");
  EXPECT_EQ(p.request.Header("x-a"), "v");
  EXPECT_TRUE(p.head.keep_alive);
  EXPECT_EQ(p.head.body_kind, BodyKind::kNone);
}

TEST(HttpRequestParserTest, ByteByByteEqualsWhole) {
  const std::string req =
      "\r\nPOST /completion HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n"
      "\r\n{\"a\":1}GET /next";
  for (size_t step : {1, 2, 3, 7, 1000}) {
    Parsed p = ParseOne(req, step);
    ASSERT_TRUE(p.status.ok()) << step << " " << p.status;
    EXPECT_EQ(p.request.body, "{\"a\":1}");
    EXPECT_EQ(p.rest, "GET /next") << "pipelined bytes must stay buffered";
  }
}

TEST(HttpRequestParserTest, RepeatedEqualContentLengthsAreOne) {
  Parsed p = ParseOne(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 2\r\n"
      "Content-Length: 2\r\n\r\nok");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.body, "ok");
}

TEST(HttpRequestParserTest, FramingConflictsAreRejected) {
  ExpectRejected(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
      "Content-Length: 6\r\n\r\nhello",
      "conflicting_content_length", 400);
  ExpectRejected("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n",
                 "conflicting_content_length", 400);
  ExpectRejected(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "content_length_with_chunked", 400);
  ExpectRejected("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
                 "invalid_content_length", 400);
  ExpectRejected("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1e3\r\n\r\n",
                 "invalid_content_length", 400);
  ExpectRejected("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n",
                 "invalid_content_length", 400);
  ExpectRejected(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
      "\r\n",
      "unsupported_transfer_encoding", 501);
  ExpectRejected(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, "
      "chunked\r\n\r\n",
      "invalid_transfer_encoding", 400);
  ExpectRejected("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                 "invalid_transfer_encoding", 400);
}

TEST(HttpRequestParserTest, HeaderSyntaxIsStrict) {
  ExpectRejected("GET / HTTP/1.1\r\nHost : h\r\n\r\n", "invalid_header", 400);
  ExpectRejected("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
                 "invalid_header", 400);
  ExpectRejected("GET / HTTP/1.1\r\nHost: h\r\nX: a\nY: b\r\n\r\n",
                 "invalid_header", 400);
  ExpectRejected(
      std::string("GET / HTTP/1.1\r\nHost: h\r\nX: a") + '\0' + "b\r\n\r\n",
      "invalid_header", 400);
  ExpectRejected("GET / HTTP/1.1\r\n\r\n", "invalid_host", 400);
  ExpectRejected("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "invalid_host",
                 400);
  ExpectRejected("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", "malformed_request_line",
                 400);
  ExpectRejected("GET / HTTP/2.0\r\nHost: h\r\n\r\n",
                 "http_version_not_supported", 505);
  ExpectRejected("GET / http/1.1\r\nHost: h\r\n\r\n", "malformed_request_line",
                 400);
  ExpectRejected("GET nope HTTP/1.1\r\nHost: h\r\n\r\n",
                 "invalid_request_target", 400);
}

TEST(HttpRequestParserTest, Http10NeedsNoHostAndClosesByDefault) {
  Parsed p = ParseOne("GET http://x:1/health?a=1 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.path, "/health");
  EXPECT_EQ(p.request.Param("a"), "1");
  EXPECT_FALSE(p.head.keep_alive);
  Parsed k = ParseOne("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  ASSERT_TRUE(k.status.ok());
  EXPECT_TRUE(k.head.keep_alive);
  Parsed c = ParseOne(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
      "Expect: 100-continue\r\n\r\n");
  ASSERT_TRUE(c.status.ok());
  EXPECT_FALSE(c.head.keep_alive);
  EXPECT_TRUE(c.head.expect_continue);
}

TEST(HttpRequestParserTest, ChunkedWithExtensionsAndTrailers) {
  const std::string req =
      "POST /t HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=value;flag\r\nhello\r\n6 ; q=\"x y\"\r\n world\r\n"
      "0\r\nX-Checksum: 1\r\nX-More: 2\r\n\r\nNEXT";
  for (size_t step : {1, 4, 1000}) {
    Parsed p = ParseOne(req, step);
    ASSERT_TRUE(p.status.ok()) << step << " " << p.status;
    EXPECT_EQ(p.request.body, "hello world");
    EXPECT_EQ(p.rest, "NEXT");
  }
}

TEST(HttpRequestParserTest, MalformedChunksAreRejected) {
  const std::string head =
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  ExpectRejected(head + "zz\r\n", "malformed_chunk", 400);
  ExpectRejected(head + "3\r\nabcX\r\n", "malformed_chunk", 400);
  ExpectRejected(head + "3 x\r\nabc\r\n", "malformed_chunk", 400);
  ExpectRejected(head + "0\r\nBad Trailer: x\r\n\r\n", "invalid_header", 400);
  ExpectRejected(head + "ffffffffffffffffffff\r\n", "body_too_large", 413);
  ExpectRejected(head + "40\r\n" + std::string(64, 'a') + "\r\n1\r\n",
                 "body_too_large", 413);
}

TEST(HttpRequestParserTest, LimitsGive413And431) {
  ExpectRejected("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n",
                 "body_too_large", 413);
  ExpectRejected(
      "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(2000, 'a') + "\r\n\r\n",
      "headers_too_large", 431);
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 9; ++i) many += "X" + std::to_string(i) + ": 1\r\n";
  ExpectRejected(many + "\r\n", "headers_too_large", 431);
  // No end of head yet, but already over the limit: refused without waiting.
  HttpRequestParser parser(SmallLimits());
  parser.Append("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'));
  StatusOr<bool> r = parser.ParseHead();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "headers_too_large");
}

TEST(HttpRequestParserTest, PipelinedRequestsComeOutInOrder) {
  HttpRequestParser parser(SmallLimits());
  parser.Append(
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\n"
      "Content-Length: 1\r\n\r\nxGET /c HTTP/1.1\r\nHost: h\r\n\r\n");
  for (const char* path : {"/a", "/b", "/c"}) {
    StatusOr<bool> head = parser.ParseHead();
    ASSERT_TRUE(head.ok() && *head) << path;
    StatusOr<bool> body = parser.ParseBody();
    ASSERT_TRUE(body.ok() && *body) << path;
    EXPECT_EQ(parser.TakeRequest().path, path);
  }
  EXPECT_TRUE(parser.pending().empty());
}

}  // namespace
}  // namespace kvault
