// The HTTP connection layer over real loopback sockets, against an
// in-process server on the tiny model: pipelining, strict framing, chunked
// bodies, deadlines, the connection limit, authentication before the body,
// and Stop ending streams with an error event and a terminating chunk.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/demo_model.h"
#include "raw_http.h"
#include "test_server.h"

namespace kvault {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing_http::RawClock;
using testing_http::RawConnection;
using testing_http::RawResponse;

constexpr milliseconds kReply{10000};  // generous: CI machines are slow

// Returns a test server on the tiny model with `options` tweaked.
std::unique_ptr<TestServer> StartTiny(ServerOptions o) {
  o.max_body_bytes = 64 << 10;
  return std::make_unique<TestServer>(MakeTinyModel(), o);
}

std::string Get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n";
}

std::string Post(const std::string& path, const std::string& body,
                 const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

// Expects `r` to be an error answer with `status` and `reason`.
void ExpectErrorReply(const std::optional<RawResponse>& r, int status,
                      const std::string& reason) {
  ASSERT_TRUE(r.has_value()) << "no answer";
  EXPECT_EQ(r->status, status) << r->body;
  json j = json::parse(r->body, nullptr, false);
  EXPECT_EQ(j["error"]["code"], status) << r->body;
  EXPECT_EQ(j["reason"], reason) << r->body;
  EXPECT_EQ(r->headers.at("server"), "kvault");
}

// Sends `request` on a fresh connection; returns the answer.
std::optional<RawResponse> Exchange(uint16_t port, const std::string& request) {
  RawConnection c(port);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c.Send(request));
  return c.ReadResponse(kReply);
}

TEST(HttpConnectionTest, PipelinedRequestsAreAnsweredInOrder) {
  auto s = StartTiny(ServerOptions());
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  ASSERT_TRUE(c.Send(Get("/health") + Post("/tokenize", R"({"content":"ab"})") +
                     Get("/props")));
  auto a = c.ReadResponse(kReply);
  auto b = c.ReadResponse(kReply);
  auto d = c.ReadResponse(kReply);
  ASSERT_TRUE(a && b && d) << "a pipelined request was dropped";
  EXPECT_EQ(json::parse(a->body), json({{"status", "ok"}}));
  EXPECT_EQ(b->status, 200);
  const auto alone =
      Exchange(s->server().port(), Post("/tokenize", R"({"content":"ab"})"));
  ASSERT_TRUE(alone.has_value());
  EXPECT_FALSE(json::parse(b->body)["tokens"].empty()) << b->body;
  EXPECT_EQ(b->body, alone->body);
  EXPECT_EQ(json::parse(d->body)["total_slots"], 2) << d->body;
}

TEST(HttpConnectionTest, AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  auto s = StartTiny(ServerOptions());
  ASSERT_TRUE(s->ok());
  const uint16_t port = s->server().port();
  const std::string body = R"({"content":"a"})";
  RawConnection c(port);
  ASSERT_TRUE(c.Send("POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                     std::to_string(body.size()) +
                     "\r\nContent-Length: 2\r\n\r\n" + body));
  ExpectErrorReply(c.ReadResponse(kReply), 400, "conflicting_content_length");
  EXPECT_TRUE(c.WaitClosed(kReply));
  ExpectErrorReply(
      Exchange(port,
               "POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: "
               "4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
      400, "content_length_with_chunked");
  ExpectErrorReply(Exchange(port,
                            "POST /tokenize HTTP/1.1\r\nHost: t\r\n"
                            "Content-Length: -1\r\n\r\n"),
                   400, "invalid_content_length");
  ExpectErrorReply(Exchange(port, "GET /health HTTP/1.1\r\nHost : t\r\n\r\n"),
                   400, "invalid_header");
  ExpectErrorReply(Exchange(port, "GET /health HTTP/3.0\r\nHost: t\r\n\r\n"),
                   505, "http_version_not_supported");
}

TEST(HttpConnectionTest, ChunkExtensionsAndTrailersAreAccepted) {
  auto s = StartTiny(ServerOptions());
  ASSERT_TRUE(s->ok());
  auto r =
      Exchange(s->server().port(),
               "POST /tokenize HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: "
               "chunked\r\n\r\n5;ext=1\r\n{\"con\r\nb ; x\r\ntent\":\"ab\"}"
               "\r\n0\r\nX-Trailer: yes\r\n\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  const auto plain =
      Exchange(s->server().port(), Post("/tokenize", R"({"content":"ab"})"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(json::parse(r->body)["tokens"].empty()) << r->body;
  EXPECT_EQ(r->body, plain->body);
}

TEST(HttpConnectionTest, ExpectContinueGetsAnInterimAnswer) {
  auto s = StartTiny(ServerOptions());
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  const std::string body = R"({"content":"abc"})";
  ASSERT_TRUE(
      c.Send("POST /tokenize HTTP/1.1\r\nHost: t\r\nExpect: "
             "100-continue\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n"));
  auto interim = c.ReadResponse(kReply);
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send(body));
  auto r = c.ReadResponse(kReply);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(HttpConnectionTest, AuthAndRouteAreDecidedBeforeTheBody) {
  ServerOptions o;
  o.api_keys = {"k3y"};
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  const uint16_t port = s->server().port();
  // 50 MB announced, none sent: the answer comes without the body.
  RawConnection c(port);
  ASSERT_TRUE(
      c.Send("POST /completion HTTP/1.1\r\nHost: t\r\n"
             "Content-Length: 52428800\r\n\r\n"));
  auto r = c.ReadResponse(kReply);
  ExpectErrorReply(r, 401, "invalid_api_key");
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_EQ(r->headers["www-authenticate"], "Bearer");
  EXPECT_TRUE(c.WaitClosed(kReply));
  ExpectErrorReply(Exchange(port, Get("/no/such/route")), 404, "no_such_route");
  ExpectErrorReply(Exchange(port, Get("/completion")), 405,
                   "method_not_allowed");
  // The scheme name is case-insensitive (RFC 7235); the key is exact.
  EXPECT_EQ(
      Exchange(port, Get("/props", "Authorization: bEaReR k3y\r\n"))->status,
      200);
  ExpectErrorReply(
      Exchange(port, Get("/props", "Authorization: Bearer k3y x\r\n")), 401,
      "invalid_api_key");
  ExpectErrorReply(
      Exchange(port, Get("/props", std::string("Authorization: Bearer k3y") +
                                       '\0' + "\r\n")),
      400, "invalid_header");
}

TEST(HttpConnectionTest, SlowHeadIsCutAtTheDeadlineWhileHealthAnswers) {
  ServerOptions o;
  o.head_timeout_ms = 600;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  RawConnection slow(s->server().port());
  const RawClock::time_point start = RawClock::now();
  ASSERT_TRUE(slow.Send("GET /health HTTP/1.1\r\n"));
  // One header line at a time keeps arriving; the deadline is for the whole
  // head, so the 408 still comes.
  std::optional<RawResponse> r;
  for (int i = 0; i < 100 && !r; ++i) {
    slow.Send("X-Slow-" + std::to_string(i) + ": 1\r\n");
    r = slow.ReadResponse(milliseconds(100));
    EXPECT_EQ(Exchange(s->server().port(), Get("/health"))->status, 200);
  }
  const auto elapsed = RawClock::now() - start;
  ExpectErrorReply(r, 408, "request_timeout");
  EXPECT_GE(elapsed, milliseconds(600));
  EXPECT_LT(elapsed, milliseconds(600) + kReply);
  EXPECT_TRUE(slow.WaitClosed(kReply));
}

TEST(HttpConnectionTest, SlowBodyIsCutAtTheDeadline) {
  ServerOptions o;
  o.body_timeout_ms = 400;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  const RawClock::time_point start = RawClock::now();
  ASSERT_TRUE(
      c.Send("POST /tokenize HTTP/1.1\r\nHost: t\r\n"
             "Content-Length: 20\r\n\r\n{\"con"));
  ExpectErrorReply(c.ReadResponse(kReply), 408, "request_timeout");
  EXPECT_GE(RawClock::now() - start, milliseconds(400));
  EXPECT_TRUE(c.WaitClosed(kReply));
}

TEST(HttpConnectionTest, HeadAnswersHeadersOnly) {
  auto s = StartTiny(ServerOptions());
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  ASSERT_TRUE(
      c.Send("HEAD /health HTTP/1.1\r\nHost: t\r\n\r\n" + Get("/health")));
  auto head = c.ReadResponse(kReply, /*no_body=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->headers["content-length"], "15");  // {"status":"ok"}
  // No body was sent: the next answer starts right after the head.
  auto get = c.ReadResponse(kReply);
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->body, R"({"status":"ok"})");
}

TEST(HttpConnectionTest, ConnectionsOverTheLimitGetA503AfterTheWait) {
  ServerOptions o;
  o.max_connections = 2;
  o.worker_wait_ms = 100;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  const uint16_t port = s->server().port();
  auto a = std::make_unique<RawConnection>(port);
  RawConnection b(port);
  // A request whose body is still arriving holds its worker; check that
  // both are held (each answered one request first, so each has one).
  const std::string partial =
      "POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n{";
  ASSERT_TRUE(a->Send(Get("/health")) && b.Send(Get("/health")));
  ASSERT_TRUE(a->ReadResponse(kReply) && b.ReadResponse(kReply));
  ASSERT_TRUE(a->Send(partial) && b.Send(partial));
  // The two heads reach the workers in the acceptor's next pass; a 503 is
  // only certain once both are taken, so wait for the first refusal.
  std::optional<RawResponse> refused;
  const RawClock::time_point start = RawClock::now();
  while (RawClock::now() < start + kReply) {
    refused = Exchange(port, Get("/health"));
    if (!refused || refused->status != 200) break;
  }
  ExpectErrorReply(refused, 503, "too_many_connections");
  EXPECT_EQ(refused->headers["connection"], "close");
  EXPECT_LT(RawClock::now() - start, milliseconds(2000));
  a.reset();  // frees a worker
  int status = 0;
  const RawClock::time_point deadline = RawClock::now() + kReply;
  while (status != 200 && RawClock::now() < deadline) {
    auto r = Exchange(port, Get("/health"));
    status = r ? r->status : 0;
  }
  EXPECT_EQ(status, 200);
}

// A request that finds every worker busy waits for one: a worker that has
// just answered is about to come free (CI caught /health answered 503 while
// the two workers were still finishing requests their clients had read).
TEST(HttpConnectionTest, RequestWaitsForAWorkerComingFree) {
  ServerOptions o;
  o.max_connections = 2;
  o.worker_wait_ms = 60000;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  const uint16_t port = s->server().port();
  RawConnection a(port);
  RawConnection b(port);
  const std::string partial =
      "POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n{";
  ASSERT_TRUE(a.Send(partial) && b.Send(partial));
  RawConnection c(port);
  ASSERT_TRUE(c.Send(Get("/health")));
  // Either c waits for a's worker or reaches a worker after it: both
  // answer 200; a 503 means it was refused while a worker was coming free.
  ASSERT_TRUE(a.Send(R"("content":"abcdef"})"));
  auto ra = a.ReadResponse(kReply);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->status, 200) << ra->body;
  auto rc = c.ReadResponse(kReply);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(rc->status, 200) << rc->body;
}

// Regression (issue 40): idle keep-alive connections used to keep their
// worker for idle_timeout, so as many of them as workers answered every
// new client, /health included, with 503 too_many_connections.
TEST(HttpConnectionTest, IdleKeepAliveConnectionsHoldNoWorker) {
  ServerOptions o;
  o.max_connections = 2;
  o.idle_timeout_ms = 60000;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  const uint16_t port = s->server().port();
  constexpr int kIdle = 64;
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawConnection>(port));
    ASSERT_TRUE(idle.back()->Send(Get("/health")));
    auto r = idle.back()->ReadResponse(kReply);
    ASSERT_TRUE(r.has_value()) << "connection " << i;
    EXPECT_EQ(r->status, 200) << "connection " << i << ": " << r->body;
  }
  // Every one stays open and idle; new clients and the idle ones alike
  // are served.
  for (int i = 0; i < 8; ++i) {
    auto fresh = Exchange(port, Post("/tokenize", R"({"content":"ab"})"));
    ASSERT_TRUE(fresh.has_value());
    EXPECT_EQ(fresh->status, 200) << fresh->body;
  }
  for (int i = 0; i < kIdle; i += 7) {
    ASSERT_TRUE(idle[i]->Send(Get("/health"))) << "connection " << i;
    auto r = idle[i]->ReadResponse(kReply);
    ASSERT_TRUE(r.has_value()) << "connection " << i << " was closed";
    EXPECT_EQ(r->status, 200) << r->body;
  }
}

// A parked keep-alive connection gets the head deadline from its first
// byte (not the idle deadline): a head that stalls gets 408 after
// head_timeout.
TEST(HttpConnectionTest, KeepAliveRequestHeadHasTheHeadDeadline) {
  ServerOptions o;
  o.idle_timeout_ms = 60000;
  o.head_timeout_ms = 400;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  ASSERT_TRUE(c.Send(Get("/health")));
  ASSERT_TRUE(c.ReadResponse(kReply));
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\n"));
  const RawClock::time_point start = RawClock::now();
  ExpectErrorReply(c.ReadResponse(kReply), 408, "request_timeout");
  EXPECT_GE(RawClock::now() - start, milliseconds(350));
}

TEST(HttpConnectionTest, KeepAliveIdleConnectionIsClosed) {
  ServerOptions o;
  o.idle_timeout_ms = 300;
  auto s = StartTiny(o);
  ASSERT_TRUE(s->ok());
  RawConnection c(s->server().port());
  ASSERT_TRUE(c.Send(Get("/health")));
  ASSERT_TRUE(c.ReadResponse(kReply));
  const RawClock::time_point start = RawClock::now();
  EXPECT_TRUE(c.WaitClosed(kReply));
  EXPECT_GE(RawClock::now() - start, milliseconds(250));
}

// A server on the demo-sized model: a stream of thousands of tokens takes
// seconds, long enough to be cut by Stop.
std::unique_ptr<TestServer> StartDemo() {
  auto model = GenerateModelInMemory(DemoModelOptions());
  EXPECT_TRUE(model.ok()) << model.status();
  EngineOptions eo = TestServer::DefaultEngineOptions();
  eo.n_ctx_total = 4096;
  eo.n_slots = 1;
  return std::make_unique<TestServer>(std::move(model).value(), ServerOptions(),
                                      eo);
}

TEST(HttpConnectionTest, StopEndsAStreamWithAnErrorEventAndLastChunk) {
  auto s = StartDemo();
  ASSERT_TRUE(s->ok());
  RawConnection stream(s->server().port());
  const json body = {{"prompt", "a"},
                     {"n_predict", 4000},
                     {"ignore_eos", true},
                     {"stream", true}};
  ASSERT_TRUE(stream.Send(Post("/completion", body.dump())));
  RawConnection half(s->server().port());
  ASSERT_TRUE(half.Send("POST /completion HTTP/1.1\r\nHost: t\r\n"));
  // The first event proves the stream runs (the head alone would not).
  ASSERT_TRUE(stream.WaitFor("data: ", kReply));
  const RawClock::time_point start = RawClock::now();
  std::thread stopper([&] { s->server().Stop(); });
  auto r = stream.ReadResponse(kReply);
  stopper.join();
  EXPECT_LT(RawClock::now() - start, milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->chunked);
  EXPECT_TRUE(r->terminated) << "no terminating chunk: " << r->body;
  std::vector<std::string> events = SsePayloads(r->body);
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back(), nullptr, false);
  EXPECT_EQ(last["reason"], "server_stopping") << events.back();
  EXPECT_EQ(last["error"]["code"], 503);
  EXPECT_TRUE(half.WaitClosed(kReply)) << "half-sent request kept open";
}

}  // namespace
}  // namespace kvault
