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

// Env::Default() whose files named "*.gated" read through GatedFile.
class GatedEnv : public Env {
 public:
  explicit GatedEnv(Gate* gate) : gate_(gate) {}
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
    if (!path.ends_with(".gated")) return file;
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

}  // namespace
}  // namespace kvault
