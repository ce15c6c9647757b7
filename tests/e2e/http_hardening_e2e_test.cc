// End to end against the real binary over raw sockets: SIGTERM during a
// stream (a last error event and a valid terminating chunk, and a prompt
// exit even with a half-sent request open), strict framing with pipelining,
// and a flood of idle connections answered fast.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "../server/raw_http.h"
#include "http_client.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing_http::RawClock;
using testing_http::RawConnection;

constexpr milliseconds kReply{20000};

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(HttpHardeningE2eTest, SigtermEndsStreamsWithAnErrorEventAndExits) {
  auto p = ServerProcess::Start(
      {"--demo-random", "-np", "1", "-c", "4096", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  RawConnection stream((*p)->port());
  const json body = {{"prompt", "a"},
                     {"n_predict", 4000},
                     {"ignore_eos", true},
                     {"stream", true}};
  ASSERT_TRUE(stream.Send(Post("/completion", body.dump())));
  ASSERT_TRUE(stream.WaitFor("data: ", kReply)) << (*p)->Log();
  RawConnection half((*p)->port());
  ASSERT_TRUE(half.Send("POST /completion HTTP/1.1\r\nHost: t\r\n"));
  RawConnection idle((*p)->port());
  const RawClock::time_point start = RawClock::now();
  auto stopped =
      std::async(std::launch::async, [&] { return StopServer(p->get()); });
  auto r = stream.ReadResponse(kReply);
  EXPECT_EQ(stopped.get(), "exit 0");
  EXPECT_LT(RawClock::now() - start, milliseconds(10000));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->chunked);
  EXPECT_TRUE(r->terminated) << "no terminating chunk";
  const size_t last = r->body.rfind("data: ");
  ASSERT_NE(last, std::string::npos);
  json event = json::parse(r->body.substr(last + 6), nullptr, false);
  EXPECT_EQ(event["reason"], "server_stopping") << r->body.substr(last);
  EXPECT_EQ(r->body.substr(r->body.size() - 2), "\n\n");
  EXPECT_TRUE(half.WaitClosed(kReply));
}

TEST(HttpHardeningE2eTest, PipelinedThenSmugglingAttemptIsRefused) {
  auto p = ServerProcess::Start(
      {"--demo-random", "-np", "1", "-c", "256", "-t", "1"});
  ASSERT_TRUE(p.ok()) << p.status();
  RawConnection c((*p)->port());
  const std::string get = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_TRUE(c.Send(get + "GET /props HTTP/1.1\r\nHost: t\r\n\r\n" +
                     "POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: 3"
                     "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
                     get));
  auto a = c.ReadResponse(kReply);
  auto b = c.ReadResponse(kReply);
  auto refused = c.ReadResponse(kReply);
  ASSERT_TRUE(a && b && refused);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(json::parse(b->body)["total_slots"], 1) << b->body;
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(json::parse(refused->body)["reason"],
            "content_length_with_chunked");
  EXPECT_TRUE(c.WaitClosed(kReply)) << "the request after it must not run";
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

TEST(HttpHardeningE2eTest, IdleConnectionFloodIsAnsweredFast) {
  auto p = ServerProcess::Start({"--demo-random", "-np", "1", "-c", "256", "-t",
                                 "1", "--threads-http", "4"});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 200; ++i) {
    flood.push_back(std::make_unique<RawConnection>((*p)->port()));
  }
  // 200 silent connections and 70 that send a head a piece at a time,
  // against 4 workers: they wait on the acceptor, holding no worker, so
  // /health is served at once (it once timed out).
  for (int i = 0; i < 70; ++i) {
    flood.push_back(std::make_unique<RawConnection>((*p)->port()));
    ASSERT_TRUE(flood.back()->Send("POST /completion HTTP/1.1\r\nHost: t"));
  }
  const RawClock::time_point start = RawClock::now();
  RawConnection probe((*p)->port());
  ASSERT_TRUE(probe.Send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto r = probe.ReadResponse(kReply);
  ASSERT_TRUE(r.has_value());
  EXPECT_LT(RawClock::now() - start, milliseconds(3000));
  EXPECT_EQ(r->status, 200) << r->body;
  // Requests whose body stalls hold workers: past the 4 workers, the next
  // request gets the fast 503.
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RawConnection>((*p)->port()));
    ASSERT_TRUE(stalled.back()->Send(
        "POST /completion HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n"
        "\r\n{"));
  }
  int refused = 0;
  const RawClock::time_point until = RawClock::now() + kReply;
  while (refused == 0 && RawClock::now() < until) {
    RawConnection extra((*p)->port());
    ASSERT_TRUE(extra.Send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto e = extra.ReadResponse(kReply);
    ASSERT_TRUE(e.has_value());
    if (e->status == 503) {
      EXPECT_EQ(json::parse(e->body)["reason"], "too_many_connections");
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1);
  stalled.clear();
  flood.clear();
  HttpClient client((*p)->port());
  int status = 0;
  const RawClock::time_point deadline = RawClock::now() + kReply;
  while (status != 200 && RawClock::now() < deadline) {
    status = client.Get("/health").status;
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(StopServer(p->get()), "exit 0");
}

}  // namespace
}  // namespace kvault::e2e
