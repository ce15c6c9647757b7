#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kvault {
namespace {

// Failing tests must not hang forever; this bounds waits that a correct pool
// satisfies immediately. It is a failure deadline, not synchronisation.
constexpr auto kDeadline = std::chrono::seconds(30);

TEST(ThreadPoolTest, ScheduleRunsEveryTask) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.num_threads(), 3u);
  std::atomic<int> num_ran{0};
  for (int i = 0; i < 1000; ++i) {
    pool.Schedule([&num_ran] { num_ran.fetch_add(1); });
  }
  pool.WaitIdle();
  EXPECT_EQ(num_ran.load(), 1000);
}

TEST(ThreadPoolTest, AllWorkersRunConcurrently) {
  constexpr int kNumThreads = 4;
  ThreadPool pool(kNumThreads);
  std::mutex mu;
  std::condition_variable cv;
  int num_arrived = 0;
  std::atomic<int> num_saw_all{0};
  std::set<std::thread::id> ids;
  for (int i = 0; i < kNumThreads; ++i) {
    pool.Schedule([&] {
      std::unique_lock<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      ++num_arrived;
      cv.notify_all();
      // Only possible if all kNumThreads tasks are running at once.
      if (cv.wait_for(lock, kDeadline,
                      [&] { return num_arrived == kNumThreads; })) {
        num_saw_all.fetch_add(1);
      }
    });
  }
  pool.WaitIdle();
  EXPECT_EQ(num_saw_all.load(), kNumThreads);
  EXPECT_EQ(ids.size(), size_t{kNumThreads});
  EXPECT_FALSE(ids.contains(std::this_thread::get_id()));
}

TEST(ThreadPoolTest, TasksMayScheduleTasks) {
  ThreadPool pool(2);
  std::atomic<int> num_ran{0};
  pool.Schedule([&] {
    num_ran.fetch_add(1);
    pool.Schedule([&] { num_ran.fetch_add(1); });
  });
  pool.WaitIdle();
  EXPECT_EQ(num_ran.load(), 2);
}

TEST(ThreadPoolTest, WaitIdleWaitsForRunningTask) {
  ThreadPool pool(1);
  std::latch started(1);
  std::latch release(1);
  std::atomic<bool> finished{false};
  pool.Schedule([&] {
    started.count_down();
    release.wait();
    finished.store(true);
  });
  started.wait();
  std::thread releaser([&] { release.count_down(); });
  pool.WaitIdle();
  EXPECT_TRUE(finished.load());
  releaser.join();
}

TEST(ThreadPoolTest, DestructorRunsQueuedTasks) {
  std::atomic<int> num_ran{0};
  {
    ThreadPool pool(1);
    std::latch release(1);
    pool.Schedule([&release] { release.wait(); });
    for (int i = 0; i < 10; ++i) {
      pool.Schedule([&num_ran] { num_ran.fetch_add(1); });
    }
    EXPECT_EQ(num_ran.load(), 0) << "the only worker is blocked";
    release.count_down();
  }
  EXPECT_EQ(num_ran.load(), 10);
}

TEST(ThreadPoolTest, ParallelForVisitsEachIndexOnce) {
  ThreadPool pool(4);
  constexpr size_t kBegin = 7;
  constexpr size_t kEnd = 10007;
  std::vector<std::atomic<int>> hits(kEnd + 5);
  pool.ParallelFor(kBegin, kEnd, [&](size_t i) { hits[i].fetch_add(1); });
  for (size_t i = 0; i < hits.size(); ++i) {
    const int expected = (i >= kBegin && i < kEnd) ? 1 : 0;
    ASSERT_EQ(hits[i].load(), expected) << "index " << i;
  }
}

TEST(ThreadPoolTest, ParallelForEmptyAndSingleRanges) {
  ThreadPool pool(2);
  std::atomic<int> num_calls{0};
  pool.ParallelFor(5, 5, [&](size_t) { num_calls.fetch_add(1); });
  pool.ParallelFor(6, 5, [&](size_t) { num_calls.fetch_add(1); });
  EXPECT_EQ(num_calls.load(), 0);
  size_t seen = 0;
  pool.ParallelFor(41, 42, [&](size_t i) { seen = i; });
  EXPECT_EQ(seen, 41u);
}

TEST(ThreadPoolTest, ParallelForCallerDoesTheWorkWhenWorkersAreBusy) {
  ThreadPool pool(1);
  std::latch release(1);
  pool.Schedule([&release] { release.wait(); });  // occupies the only worker
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> num_on_caller{0};
  pool.ParallelFor(0, 100, [&](size_t) {
    if (std::this_thread::get_id() == caller) num_on_caller.fetch_add(1);
  });
  EXPECT_EQ(num_on_caller.load(), 100);
  release.count_down();
  pool.WaitIdle();
}

TEST(ThreadPoolTest, NestedParallelForDoesNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<uint64_t> sum{0};
  pool.ParallelFor(0, 8, [&](size_t outer) {
    pool.ParallelFor(0, 100,
                     [&](size_t inner) { sum.fetch_add(outer * 100 + inner); });
  });
  // Sum of 0..799.
  EXPECT_EQ(sum.load(), 799u * 800u / 2u);
}

TEST(ThreadPoolTest, ConcurrentParallelForsFromManyThreads) {
  ThreadPool pool(3);
  constexpr int kNumCallers = 4;
  constexpr int kNumRounds = 200;
  std::vector<uint64_t> sums(kNumCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kNumCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < kNumRounds; ++round) {
        std::atomic<uint64_t> sum{0};
        pool.ParallelFor(0, 64, [&](size_t i) { sum.fetch_add(i); });
        sums[c] += sum.load();
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int c = 0; c < kNumCallers; ++c) {
    EXPECT_EQ(sums[c], uint64_t{kNumRounds} * (63 * 64 / 2)) << "caller " << c;
  }
}

TEST(ThreadPoolTest, ParallelForSeesWritesOfAllIterations) {
  // ParallelFor returning must publish every iteration's plain writes.
  ThreadPool pool(4);
  std::vector<int> out(5000, 0);
  pool.ParallelFor(0, out.size(), [&](size_t i) { out[i] = int(i) * 3; });
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], int(i) * 3);
}

TEST(ThreadPoolDeathTest, ZeroThreadsIsAProgrammerError) {
  EXPECT_DEATH(ThreadPool pool(0), "needs a worker");
}

}  // namespace
}  // namespace kvault
