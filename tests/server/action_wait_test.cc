#include "server/action_wait.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/reasons.h"

namespace kvault {
namespace {

using Start = std::function<Status(Reply<uint64_t>)>;

// A request whose connection reports `results` in turn (then the handler's
// descriptor as WaitForFd sees it), recording what each wait watched.
HttpRequest ScriptedRequest(std::vector<WaitResult> results,
                            std::vector<WaitAlso>* seen) {
  HttpRequest req;
  auto left = std::make_shared<std::vector<WaitResult>>(std::move(results));
  req.wait = [left, seen](int fd, WaitAlso also, WaitClock::time_point d) {
    seen->push_back(also);
    if (left->empty()) return WaitForFd(fd, d);
    const WaitResult r = left->front();
    left->erase(left->begin());
    return r;
  };
  return req;
}

TEST(ActionWaitTest, ReturnsTheReplyGivenOnAnotherThread) {
  HttpRequest req;  // no connection: waits on the descriptor alone
  std::thread engine;
  StatusOr<uint64_t> r = AwaitAction<uint64_t>(req, [&](Reply<uint64_t> reply) {
    engine = std::thread([reply] { reply(uint64_t{42}); });
    return Status::Ok();
  });
  engine.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 42u);
}

TEST(ActionWaitTest, ReplyErrorsAndStartErrorsPassThrough) {
  HttpRequest req;
  StatusOr<uint64_t> r = AwaitAction<uint64_t>(req, [](Reply<uint64_t> reply) {
    reply(NotFoundError("no file").WithReason(kReasonFileNotFound));
    return Status::Ok();
  });
  EXPECT_EQ(r.status().reason(), kReasonFileNotFound);
  bool replied = false;
  r = AwaitAction<uint64_t>(req, [&](Reply<uint64_t>) {
    replied = true;
    return InvalidArgumentError("bad slot").WithReason(kReasonSlotOutOfRange);
  });
  EXPECT_TRUE(replied);
  EXPECT_EQ(r.status().reason(), kReasonSlotOutOfRange);
}

// A client that hangs up frees the worker; the action's late reply still
// lands safely (the mailbox outlives the wait).
TEST(ActionWaitTest, ClientGoneEndsTheWaitAndTheLateReplyIsHarmless) {
  std::vector<WaitAlso> seen;
  HttpRequest req = ScriptedRequest({WaitResult::kClientGone}, &seen);
  Reply<uint64_t> kept;
  StatusOr<uint64_t> r = AwaitAction<uint64_t>(req, [&](Reply<uint64_t> reply) {
    kept = reply;
    return Status::Ok();
  });
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(r.status().reason(), kReasonClientClosed);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].client_gone);
  EXPECT_TRUE(seen[0].stopping);
  kept(uint64_t{7});  // after the worker left
}

// A stopping server keeps waiting (no longer for the stop) until the grace
// deadline, then answers 503 server_stopping.
TEST(ActionWaitTest, StoppingWaitsForGraceThenGivesUp) {
  std::vector<WaitAlso> seen;
  HttpRequest req = ScriptedRequest(
      {WaitResult::kStopping, WaitResult::kTimedOut}, &seen);
  StatusOr<uint64_t> r = AwaitAction<uint64_t>(
      req, [](Reply<uint64_t>) { return Status::Ok(); });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().reason(), kReasonServerStopping);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].stopping);
  EXPECT_FALSE(seen[1].stopping);
}

// The reply that arrives within the grace period is the answer.
TEST(ActionWaitTest, StoppingStillDeliversAReplyThatComesInTime) {
  std::vector<WaitAlso> seen;
  HttpRequest req = ScriptedRequest({WaitResult::kStopping}, &seen);
  StatusOr<uint64_t> r = AwaitAction<uint64_t>(req, [](Reply<uint64_t> reply) {
    reply(uint64_t{5});
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 5u);
}

}  // namespace
}  // namespace kvault
