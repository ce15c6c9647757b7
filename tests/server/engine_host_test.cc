// EngineHost: the engine is unloaded after the idle time with no waking
// lease, loaded again by Wake, kept while a lease is held; Peek neither
// wakes nor keeps the server awake.
#include "server/engine_host.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_server.h"

namespace kvault {
namespace {

using std::chrono::milliseconds;

StatusOr<std::unique_ptr<Engine>> NewEngine() {
  auto model = LoadStoriesOrNull();
  if (model == nullptr) return NotFoundError("no model");
  return Engine::Create(std::move(model), TestServer::DefaultEngineOptions());
}

// Waits up to 5 s for the host to reach `sleeping`.
bool WaitSleeping(const EngineHost& host, bool sleeping) {
  for (int i = 0; i < 500; ++i) {
    if (host.sleeping() == sleeping) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

class EngineHostTest : public testing::Test {
 protected:
  void SetUp() override {
    auto first = NewEngine();
    if (!first.ok()) GTEST_SKIP() << "missing " << StoriesModelPath();
    host_ = std::make_unique<EngineHost>(
        std::move(first).value(),
        [this] {
          ++loads_;
          return NewEngine();
        },
        milliseconds(150));
    host_->SetHooks({.before_sleep = [this](Engine&) { ++sleeps_; },
                     .after_wake = [this](Engine&) { ++wakes_; }});
  }
  std::unique_ptr<EngineHost> host_;
  std::atomic<int> loads_{0}, sleeps_{0}, wakes_{0};
};

TEST_F(EngineHostTest, SleepsWhenIdleAndWakesOnDemand) {
  EXPECT_FALSE(host_->sleeping());
  ASSERT_TRUE(WaitSleeping(*host_, true));
  EXPECT_EQ(sleeps_, 1);
  EXPECT_EQ(host_->Peek().engine(), nullptr);  // reading does not wake
  EXPECT_TRUE(host_->sleeping());
  StatusOr<EngineHost::Lease> lease = host_->Wake();
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_NE(lease->engine(), nullptr);
  EXPECT_EQ(loads_, 1);
  EXPECT_EQ(wakes_, 1);
  EXPECT_FALSE(host_->sleeping());
}

TEST_F(EngineHostTest, AHeldLeaseKeepsTheEngine) {
  StatusOr<EngineHost::Lease> lease = host_->Wake();
  ASSERT_TRUE(lease.ok());
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(host_->sleeping());
  EXPECT_EQ(sleeps_, 0);
  *lease = EngineHost::Lease();  // released: the idle clock starts now
  ASSERT_TRUE(WaitSleeping(*host_, true));
}

TEST_F(EngineHostTest, ConcurrentWakesLoadOnce) {
  ASSERT_TRUE(WaitSleeping(*host_, true));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { ok += host_->Wake().ok() ? 1 : 0; });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(loads_, 1);
}

TEST_F(EngineHostTest, ShutdownRefusesWakes) {
  host_->Shutdown();
  EXPECT_FALSE(host_->Wake().ok());
  EXPECT_EQ(host_->Peek().engine(), nullptr);
  host_->Shutdown();  // idempotent
}

}  // namespace
}  // namespace kvault
