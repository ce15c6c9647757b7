#include "core/interrupt.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvault {
namespace {

TEST(CancelFlagTest, RaisedOnceStaysRaisedAndWakesTheWaiter) {
  CancelFlag flag;
  EXPECT_FALSE(flag.Requested());
  std::thread waiter([&flag] { flag.WaitUntilRaised(); });
  flag.Raise();
  waiter.join();  // returns only because Raise woke it
  EXPECT_TRUE(flag.Requested());
  flag.Raise();  // idempotent
  EXPECT_TRUE(flag.Requested());
  flag.WaitUntilRaised();  // already raised: returns at once
}

// Answers "stop" from its `stop_at`-th question on, counting them.
class StopAt final : public Interrupt {
 public:
  explicit StopAt(int stop_at) : stop_at_(stop_at) {}
  bool Requested() const override { return ++asked_ >= stop_at_; }
  int asked() const { return asked_; }

 private:
  const int stop_at_;
  mutable int asked_ = 0;
};

TEST(InterruptPollerTest, AsksEveryNthPollAndThenStaysStopped) {
  StopAt interrupt(2);
  InterruptPoller poller(&interrupt, "the work", 4);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(poller.Poll().ok()) << i;
  EXPECT_EQ(interrupt.asked(), 1);  // at the 4th poll
  const Status stopped = poller.Poll();  // the 8th: asked again, stop
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(stopped.reason(), "cancelled");
  EXPECT_NE(stopped.message().find("the work was stopped"), std::string::npos)
      << stopped;
  EXPECT_EQ(poller.Poll().code(), StatusCode::kCancelled);
  EXPECT_EQ(interrupt.asked(), 2);  // not asked again once stopped
}

TEST(InterruptPollerTest, NoInterruptNeverStops) {
  InterruptPoller poller(nullptr, "the work", 1);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(poller.Poll().ok());
}

}  // namespace
}  // namespace kvault
