#include "core/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Failing tests must not hang forever; a correct CondVar wakes long before.
constexpr auto kDeadline = std::chrono::seconds(30);

// The annotated shape a user of Mutex and CondVar writes.
class Counter {
 public:
  void Add(int n) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    value_ += n;
    cv_.SignalAll();
  }
  // Waits until the value reaches `target`; false if `deadline` came first.
  bool WaitFor(int target, steady_clock::time_point deadline) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return cv_.WaitUntil(&mu_, deadline,
                         [&]() REQUIRES(mu_) { return value_ >= target; });
  }
  int value() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return value_;
  }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  int value_ GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, MutexLockSerialisesWriters) {
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < 10000; ++i) counter.Add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 40000);
}

TEST(MutexTest, TryLockFailsWhileAnotherThreadHoldsIt) {
  Mutex mu;
  mu.Lock();
  bool got = true;
  std::thread([&mu, &got] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_FALSE(got);
  mu.Unlock();
  ASSERT_TRUE(mu.TryLock());
  mu.AssertHeld();
  mu.Unlock();
}

TEST(CondVarTest, PredicateWaitReturnsOnceTrue) {
  Mutex mu;
  CondVar cv;
  bool ready = false;  // guarded by mu (a local cannot carry GUARDED_BY)
  std::thread setter([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.Signal();
  });
  {
    MutexLock lock(&mu);
    cv.Wait(&mu, [&] { return ready; });
    EXPECT_TRUE(ready);
  }
  setter.join();
}

TEST(CondVarTest, PlainWaitInALoop) {
  Mutex mu;
  CondVar cv;
  int stage = 0;
  std::thread setter([&] {
    for (int i = 1; i <= 3; ++i) {
      MutexLock lock(&mu);
      stage = i;
      cv.SignalAll();
    }
  });
  {
    MutexLock lock(&mu);
    while (stage < 3) cv.Wait(&mu);
  }
  setter.join();
  EXPECT_EQ(stage, 3);
}

TEST(CondVarTest, WaitUntilTimesOutWithTheMutexHeld) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  const auto start = steady_clock::now();
  EXPECT_FALSE(cv.WaitUntil(&mu, start + milliseconds(20)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
  // Both predicate forms: false when the deadline passes first, true (at
  // once) when the predicate already holds.
  EXPECT_FALSE(
      cv.WaitUntil(&mu, steady_clock::now() + milliseconds(5), [] {
        return false;
      }));
  EXPECT_TRUE(cv.WaitUntil(&mu, steady_clock::now() - milliseconds(1),
                           [] { return true; }));
  // Still held: another thread cannot take it.
  bool got = true;
  std::thread([&mu, &got] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_FALSE(got);
}

TEST(CondVarTest, SignalAllWakesEveryWaiter) {
  Counter counter;
  std::vector<std::thread> waiters;
  std::vector<char> woke(4, 0);
  for (int t = 0; t < 4; ++t) {
    waiters.emplace_back([&counter, &woke, t] {
      woke[t] = counter.WaitFor(1, steady_clock::now() + kDeadline);
    });
  }
  counter.Add(1);
  for (std::thread& t : waiters) t.join();
  for (char w : woke) EXPECT_TRUE(w);
}

}  // namespace
}  // namespace kvault
