// Slot I/O runs off the decode loop: while a restore's file reads are held
// on the I/O thread, another slot keeps generating, and the restore then
// completes normally. Also a save whose write runs on the I/O thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/env.h"
#include "core/fault_injecting_env.h"
#include "engine/engine.h"
#include "engine_test_util.h"

namespace kvault {
namespace {

using engine_test::GenPrompt;
using engine_test::MakeGenModel;
using engine_test::RecordingSink;

// A gate the I/O thread waits at; the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool reached = false;
  bool open = false;
  std::thread::id scheduler;  // reads on this thread pass

  void Arrive() {
    std::unique_lock<std::mutex> lock(mu);
    reached = true;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
};

class GatedFile : public RandomAccessFile {
 public:
  GatedFile(std::unique_ptr<RandomAccessFile> base, Gate* gate)
      : base_(std::move(base)), gate_(gate) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    if (std::this_thread::get_id() != gate_->scheduler) gate_->Arrive();
    return base_->ReadAt(offset, out);
  }
  uint64_t size() const override { return base_->size(); }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  Gate* gate_;
};

// Env::Default() whose files named "*<suffix>" read through GatedFile.
class GatedEnv : public Env {
 public:
  explicit GatedEnv(Gate* gate, std::string suffix = ".gated")
      : gate_(gate), suffix_(std::move(suffix)) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    return base_->NewWritableFile(path);
  }
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    return base_->NewSequentialFile(path);
  }
  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                        base_->NewRandomAccessFile(path));
    if (!path.ends_with(suffix_)) return file;
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<GatedFile>(std::move(file), gate_));
  }
  bool FileExists(const std::string& path) override {
    return base_->FileExists(path);
  }
  StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return base_->GetFileSize(path);
  }
  StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override {
    return base_->GetChildren(dir);
  }
  Status RemoveFile(const std::string& path) override {
    return base_->RemoveFile(path);
  }
  Status RenameFile(const std::string& src, const std::string& dst) override {
    return base_->RenameFile(src, dst);
  }
  Status CreateDir(const std::string& dir) override {
    return base_->CreateDir(dir);
  }
  Status SyncDir(const std::string& dir) override {
    return base_->SyncDir(dir);
  }
  uint64_t NowMicros() override { return base_->NowMicros(); }

 private:
  Env* base_ = Env::Default();
  Gate* gate_;
  std::string suffix_;
};

TEST(EngineAsyncIoTest, OtherSlotsDecodeWhileARestoreReads) {
  Gate gate;
  GatedEnv env(&gate);
  EngineOptions options;
  options.n_ctx_total = 1024;
  options.n_slots = 2;
  options.ctx_per_slot = 512;
  options.num_threads = 1;
  options.sync_saves = false;
  options.env = &env;
  auto engine = Engine::Create(MakeGenModel(1), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string path =
      engine_test::TempDir("async_io") + "/slot1.gated";

  auto first = std::make_shared<RecordingSink>();
  first->OnEachToken([&](size_t) { gate.scheduler = std::this_thread::get_id(); });
  CompletionParams p1 = engine_test::Greedy(GenPrompt(30, 1), 8, 1);
  p1.ignore_eos = true;
  ASSERT_TRUE((*engine)->Submit(p1, first).ok());
  ASSERT_TRUE(first->Wait().ok());
  auto saved = (*engine)->SaveSlot(1, path);  // written on the I/O thread
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->n_saved, 37u);

  // Slot 0 generates for a long time; count its tokens.
  std::mutex mu;
  std::condition_variable cv;
  size_t generated = 0;
  auto busy = std::make_shared<RecordingSink>();
  busy->OnEachToken([&](size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    generated = n;
    cv.notify_all();
  });
  CompletionParams p0 = engine_test::Greedy(GenPrompt(10, 2), 480, 0);
  p0.ignore_eos = true;
  auto busy_id = (*engine)->Submit(p0, busy);
  ASSERT_TRUE(busy_id.ok());

  auto restore = std::async(std::launch::async, [&] {
    return (*engine)->RestoreSlot(1, path);
  });
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.reached; });
  }
  // The restore's I/O is held: slot 0 must still make progress.
  size_t at_gate;
  {
    std::lock_guard<std::mutex> lock(mu);
    at_gate = generated;
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    const bool progressed = cv.wait_for(lock, std::chrono::seconds(60), [&] {
      return generated >= at_gate + 5;
    });
    EXPECT_TRUE(progressed) << "slot 0 stalled during the restore's I/O";
  }
  const SlotInfo during = (*engine)->Slots()[1];
  EXPECT_EQ(during.state, "io");
  EXPECT_TRUE(during.is_processing);
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  auto restored = restore.get();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, 37u);
  EXPECT_EQ((*engine)->Slots()[1].n_cached, 37u);
  EXPECT_EQ((*engine)->Slots()[1].state, "idle");
  (*engine)->Cancel(*busy_id);
  EXPECT_EQ(busy->Wait().status().code(), StatusCode::kCancelled);
  EXPECT_EQ((*engine)->Metrics().restores_ok, 1u);
}

// Regression (issue 17): a restore whose file never answers (a FIFO, a
// hung network filesystem) froze every slot. Now it fails with io_timeout
// at its deadline, the slot keeps its old KV, and the others generate.
TEST(EngineAsyncIoTest, StuckRestoreTimesOutAndOthersKeepGenerating) {
  Gate gate;
  GatedEnv env(&gate);
  EngineOptions options;
  options.n_ctx_total = 1024;
  options.n_slots = 2;
  options.ctx_per_slot = 512;
  options.num_threads = 1;
  options.sync_saves = false;
  options.slot_io_timeout_ms = 300;
  options.env = &env;
  auto engine = Engine::Create(MakeGenModel(1), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string path =
      engine_test::TempDir("async_timeout") + "/slot1.gated";
  CompletionParams p1 = engine_test::Greedy(GenPrompt(30, 1), 8, 1);
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), p1).ok());
  ASSERT_TRUE((*engine)->SaveSlot(1, path).ok());
  const uint64_t cached = (*engine)->Slots()[1].n_cached;

  auto stuck = std::async(std::launch::async,
                          [&] { return (*engine)->RestoreSlot(1, path); });
  ASSERT_EQ(stuck.wait_for(std::chrono::seconds(60)),
            std::future_status::ready)
      << "the restore waited on its file past the deadline";
  const auto timed_out = stuck.get();
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(timed_out.status().reason(), kReasonIoTimeout)
      << timed_out.status();
  EXPECT_EQ((*engine)->Slots()[1].n_cached, cached);
  EXPECT_EQ((*engine)->Slots()[1].state, "idle");

  // While the reader is still stuck, the other slot generates.
  auto other = engine_test::RunToEnd(
      engine->get(), engine_test::Greedy(GenPrompt(10, 2), 8, 0));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->tokens.size(), 8u);
  EngineMetrics m = (*engine)->Metrics();
  EXPECT_EQ(m.io_timeouts, 1u);
  EXPECT_EQ(m.io_stuck, 1u);
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  // Once the file answers, a restore works again.
  auto restored = (*engine)->RestoreSlot(1, path);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, cached);
}

// Regression (issue 17): saving a spilled slot copied its tier entry on the
// scheduler thread, so a slow or hung disk under the spill tier stopped
// every slot for as long as the copy took. The copy now runs on the I/O
// thread: with every read of the tier's files held (the scheduler's too),
// the other slot still generates, and the save completes once they answer.
TEST(EngineAsyncIoTest, SavingASpilledSlotNeverStopsTheOthers) {
  Gate gate;  // no thread passes: gate.scheduler is nobody
  GatedEnv env(&gate, ".kvstate");
  EngineOptions options;
  options.n_ctx_total = 1024;
  options.n_slots = 2;
  options.ctx_per_slot = 512;
  options.num_threads = 1;
  options.sync_saves = false;
  options.cache_idle_slots = true;  // starting slot 0 spills slot 1 at once
  options.spill_ram_bytes = 0;
  options.spill_dir = engine_test::TempDir("async_spilled_save");
  options.spill_disk_bytes = uint64_t{64} << 20;
  options.env = &env;
  auto engine = Engine::Create(MakeGenModel(1), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(),
                                    engine_test::Greedy(GenPrompt(30, 1), 8, 1))
                  .ok());
  const uint64_t cached = (*engine)->Slots()[1].n_cached;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(),
                                    engine_test::Greedy(GenPrompt(10, 2), 4, 0))
                  .ok());
  ASSERT_EQ((*engine)->Slots()[1].state, "spilled");

  const std::string path = options.spill_dir + "/../saved-slot1.bin";
  auto save = std::async(std::launch::async,
                         [&] { return (*engine)->SaveSlot(1, path); });
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.reached; });
  }
  // The save's copy is held at its first read; slot 0 still generates.
  auto other = engine_test::RunToEnd(
      engine->get(), engine_test::Greedy(GenPrompt(12, 3), 8, 0));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->tokens.size(), 8u);
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  auto saved = save.get();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->n_saved, cached);
  auto restored = (*engine)->RestoreSlot(0, path);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, cached);
}

// Regression (issue 17): one I/O thread ran every slot's file I/O in turn,
// so a slot whose file was slow (a save's fsync on a busy disk, a stalled
// mount) held up another slot's restore until that one's deadline passed
// without it ever starting. Each slot's I/O now has a thread.
TEST(EngineAsyncIoTest, OneSlotsStuckFileDoesNotQueueAnotherSlotsRestore) {
  Gate gate;  // no thread passes
  GatedEnv env(&gate);
  EngineOptions options;
  options.n_ctx_total = 1024;
  options.n_slots = 2;
  options.ctx_per_slot = 512;
  options.num_threads = 1;
  options.sync_saves = false;
  options.slot_io_timeout_ms = 600000;  // no deadline within the test
  options.env = &env;
  auto engine = Engine::Create(MakeGenModel(1), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string dir = engine_test::TempDir("async_two_threads");
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(),
                                    engine_test::Greedy(GenPrompt(30, 1), 8, 1))
                  .ok());
  ASSERT_TRUE((*engine)->SaveSlot(1, dir + "/slot1.gated").ok());
  ASSERT_TRUE((*engine)->SaveSlot(1, dir + "/slot1.bin").ok());
  const uint64_t cached = (*engine)->Slots()[1].n_cached;

  auto stuck = std::async(std::launch::async, [&] {
    return (*engine)->RestoreSlot(1, dir + "/slot1.gated");
  });
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.reached; });
  }
  auto other = std::async(std::launch::async, [&] {
    return (*engine)->RestoreSlot(0, dir + "/slot1.bin");
  });
  const bool finished =
      other.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  ASSERT_TRUE(finished) << "slot 0's restore waited for slot 1's file";
  auto restored = other.get();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, cached);
  auto late = stuck.get();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->n_restored, cached);
}

// Regression (issue 17): a full disk was answered 503 resource_exhausted
// while the docs said 500 io_error; it is now reason disk_full (HTTP 507,
// see http_error_test) and counts as a failed save.
TEST(EngineAsyncIoTest, FullDiskSaveHasReasonDiskFull) {
  FaultInjectingEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  EngineOptions options;
  options.n_ctx_total = 256;
  options.n_slots = 1;
  options.num_threads = 1;
  options.env = &env;
  auto engine = Engine::Create(MakeGenModel(1), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(engine_test::RunToEnd(
                  engine->get(), engine_test::Greedy(GenPrompt(20, 1), 4, 0))
                  .ok());
  env.FailNthWrite(1, {.kind = FaultKind::kNoSpace, .sticky = true});
  auto saved = (*engine)->SaveSlot(0, "/d/full.bin");
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(saved.status().reason(), kReasonDiskFull) << saved.status();
  EXPECT_FALSE(env.FileExists("/d/full.bin"));
  EXPECT_EQ((*engine)->Metrics().saves_failed, 1u);
}

}  // namespace
}  // namespace kvault
