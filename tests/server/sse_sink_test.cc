#include "server/sse_sink.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvault {
namespace {

TEST(SseSinkTest, SseDataFraming) {
  EXPECT_EQ(SseData(nlohmann::json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(SseSinkTest, QueuesTokensThenResultInOrder) {
  std::shared_ptr<QueueSink> made = QueueSink::Create().value();
  QueueSink& sink = *made;
  TokenEvent a;
  a.token = 5;
  a.text = "he";
  TokenEvent b;
  b.token = 6;
  b.text = "llo";
  sink.OnStart(3);
  EXPECT_TRUE(sink.OnToken(a));
  EXPECT_TRUE(sink.OnToken(b));
  EXPECT_FALSE(sink.finished());
  CompletionResult r;
  r.content = "hello";
  sink.OnDone(r);
  EXPECT_TRUE(sink.finished());
  std::vector<QueueSink::Item> items = sink.Take();
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].start, 3u);
  EXPECT_FALSE(items[0].token.has_value());
  items.erase(items.begin());
  EXPECT_EQ(items[0].token->text, "he");
  EXPECT_FALSE(items[0].start.has_value());
  EXPECT_EQ(items[1].token->token, 6);
  ASSERT_TRUE(items[2].done.has_value());
  EXPECT_FALSE(items[2].token.has_value());
  EXPECT_EQ((*items[2].done)->content, "hello");
  EXPECT_TRUE(sink.Take().empty());
}

TEST(SseSinkTest, ClientGoneMakesOnTokenReturnFalse) {
  std::shared_ptr<QueueSink> made = QueueSink::Create().value();
  QueueSink& sink = *made;
  EXPECT_TRUE(sink.OnToken(TokenEvent{}));
  sink.MarkClientGone();
  EXPECT_TRUE(sink.client_gone());
  EXPECT_FALSE(sink.OnToken(TokenEvent{}));
  EXPECT_EQ(sink.Take().size(), 1u);  // nothing queued after
}

TEST(SseSinkTest, WakeFdIsReadableExactlyWhileItemsAreQueued) {
  std::shared_ptr<QueueSink> sink = QueueSink::Create().value();
  const auto now = WaitClock::now();
  EXPECT_EQ(WaitForFd(sink->wake_fd(), now), WaitResult::kTimedOut);
  sink->OnPromptProgress(PromptProgress{});
  EXPECT_TRUE(sink->OnToken(TokenEvent{}));
  EXPECT_EQ(WaitForFd(sink->wake_fd(), now), WaitResult::kReady);
  EXPECT_EQ(sink->Take().size(), 2u);
  EXPECT_EQ(WaitForFd(sink->wake_fd(), now), WaitResult::kTimedOut);
  EXPECT_TRUE(sink->Take().empty());
}

TEST(SseSinkTest, WaitWakesWhenAnotherThreadQueues) {
  std::shared_ptr<QueueSink> made = QueueSink::Create().value();
  QueueSink& sink = *made;
  std::thread producer([&sink] {
    sink.OnDone(StatusOr<CompletionResult>(CancelledError("stop")));
  });
  std::vector<QueueSink::Item> items;
  // Bounded: the producer runs at once; a minute means it never came.
  const auto deadline = WaitClock::now() + std::chrono::minutes(1);
  while (items.empty() && WaitClock::now() < deadline) {
    WaitForFd(sink.wake_fd(), deadline);
    items = sink.Take();
  }
  producer.join();
  ASSERT_EQ(items.size(), 1u);
  ASSERT_TRUE(items[0].done.has_value());
  EXPECT_EQ(items[0].done->status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace kvault
