// Tests for ComputePool: every index of a loop runs exactly once, whatever
// the loop size and worker count; nested and concurrent Runs go inline
// rather than deadlocking; workers that wake late never touch a finished
// loop.
#include "model/kernels/compute_pool.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvault::kernels {
namespace {

// Runs a loop of n indices on `pool` and expects each visited exactly once.
void ExpectEachIndexOnce(ComputePool& pool, size_t n) {
  std::vector<std::atomic<int>> hits(n);  // [n]
  pool.ParallelFor(n, [&](size_t i) {
    hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
  }
}

TEST(ComputePoolTest, ReportsWorkerCount) {
  ComputePool pool(3);
  EXPECT_EQ(pool.num_workers(), 3u);
}

TEST(ComputePoolTest, EmptyLoopCallsNothing) {
  ComputePool pool(2);
  std::atomic<int> calls{0};
  pool.ParallelFor(0, [&](size_t) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 0);
}

TEST(ComputePoolTest, SingleIterationRunsOnCaller) {
  ComputePool pool(2);
  std::thread::id ran_on;
  size_t index = 99;
  pool.ParallelFor(1, [&](size_t i) {
    ran_on = std::this_thread::get_id();
    index = i;
  });
  EXPECT_EQ(index, 0u);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ComputePoolTest, EveryIndexOnceForVariousSizesAndWorkers) {
  for (size_t num_workers : {1u, 2u, 3u, 4u, 8u}) {
    ComputePool pool(num_workers);
    for (size_t n : {2u, 3u, 7u, 8u, 9u, 64u, 1000u, 100000u}) {
      SCOPED_TRACE(testing::Message() << "workers " << num_workers << " n "
                                      << n);
      ExpectEachIndexOnce(pool, n);
    }
  }
}

TEST(ComputePoolTest, RawRunPassesContext) {
  ComputePool pool(2);
  std::vector<std::atomic<size_t>> out(50);  // [50]
  pool.Run(out.size(),
           [](const void* ctx, size_t i) {
             auto* v = static_cast<std::vector<std::atomic<size_t>>*>(
                 const_cast<void*>(ctx));
             (*v)[i].fetch_add(i + 1);
           },
           &out);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].load(), i + 1);
}

TEST(ComputePoolTest, NestedRunsInlineWithoutDeadlock) {
  ComputePool pool(3);
  constexpr size_t kOuter = 16;
  constexpr size_t kInner = 33;
  std::vector<std::atomic<int>> hits(kOuter * kInner);  // [kOuter, kInner]
  std::atomic<int> inner_off_thread{0};
  pool.ParallelFor(kOuter, [&](size_t i) {
    const std::thread::id outer_thread = std::this_thread::get_id();
    pool.ParallelFor(kInner, [&](size_t j) {
      if (std::this_thread::get_id() != outer_thread) {
        inner_off_thread.fetch_add(1);
      }
      hits[i * kInner + j].fetch_add(1);
    });
  });
  for (size_t k = 0; k < hits.size(); ++k) ASSERT_EQ(hits[k].load(), 1) << k;
  // A nested loop must run on the thread that called it.
  EXPECT_EQ(inner_off_thread.load(), 0);
}

TEST(ComputePoolTest, ConcurrentCallersBothComplete) {
  ComputePool pool(2);
  constexpr size_t kLoops = 300;
  constexpr size_t kN = 257;
  auto caller = [&](std::vector<std::atomic<int>>* hits) {
    for (size_t loop = 0; loop < kLoops; ++loop) {
      pool.ParallelFor(kN, [&](size_t i) { (*hits)[i].fetch_add(1); });
    }
  };
  std::vector<std::atomic<int>> hits_a(kN);  // [kN]
  std::vector<std::atomic<int>> hits_b(kN);  // [kN]
  std::thread a(caller, &hits_a);
  std::thread b(caller, &hits_b);
  a.join();
  b.join();
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(hits_a[i].load(), static_cast<int>(kLoops)) << i;
    ASSERT_EQ(hits_b[i].load(), static_cast<int>(kLoops)) << i;
  }
}

TEST(ComputePoolTest, ManyBackToBackLoops) {
  ComputePool pool(3);
  constexpr size_t kLoops = 2000;
  std::vector<std::atomic<uint64_t>> sums(5);  // [5]
  for (size_t loop = 0; loop < kLoops; ++loop) {
    const size_t n = 2 + loop % 4;
    pool.ParallelFor(n, [&](size_t i) { sums[i].fetch_add(loop); });
  }
  // Index i ran in every loop whose size exceeded i.
  for (size_t i = 0; i < sums.size(); ++i) {
    uint64_t expected = 0;
    for (size_t loop = 0; loop < kLoops; ++loop) {
      if (2 + loop % 4 > i) expected += loop;
    }
    EXPECT_EQ(sums[i].load(), expected) << "index " << i;
  }
}

// Many more workers than cores, and loops smaller than the worker count:
// most workers wake after their loop is over. Each loop's body and counters
// live in that iteration's scope, so a late worker running a finished loop's
// body would corrupt a later loop's counts (and trip ASan's use-after-scope).
TEST(ComputePoolTest, LateWorkersNeverRunFinishedLoops) {
  ComputePool pool(8);
  for (size_t loop = 0; loop < 5000; ++loop) {
    const size_t n = 2 + loop % 3;
    std::atomic<int> hits[4] = {};
    pool.ParallelFor(n, [&hits](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_EQ(hits[i].load(), i < n ? 1 : 0) << "loop " << loop << " i " << i;
    }
  }
}

TEST(ComputePoolTest, DestroysCleanlyWithoutRuns) {
  for (int k = 0; k < 20; ++k) {
    ComputePool pool(4);
    EXPECT_EQ(pool.num_workers(), 4u);
  }
}

// Without spinning, idle workers sleep at once; loops still run on them
// (they are woken), back to back and after idle gaps.
TEST(ComputePoolTest, NonSpinningPoolRunsEveryIndexOnce) {
  ComputePool pool(3, /*spin=*/false);
  for (int k = 0; k < 50; ++k) ExpectEachIndexOnce(pool, 97);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ExpectEachIndexOnce(pool, 777);
}

}  // namespace
}  // namespace kvault::kernels
