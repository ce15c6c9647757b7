// KvVault without any spill tier (issue 17, fault 6): a restore that fits
// only in its target's own pages replaces the target in place, and every
// way it can fail (a bad chunk anywhere, a read error, a pool that filled up
// while the file was read, a file too big) leaves the target's old KV.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/fault_injecting_env.h"
#include "kv/kv_vault.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::SequenceBytes;
using state_test::SmallLayout;

constexpr uint32_t kPageSize = 4;
constexpr uint32_t kNumPages = 16;
constexpr SeqId kTarget{9};
constexpr SeqId kScratch{0xFFFFFF00u};
// Chunks of 4 tokens (512 B per cell), so a file has several.
constexpr uint64_t kChunkBytes = 4 * 512;
constexpr uint64_t kTrailerBytes = 24;

struct Content {
  std::vector<TokenPos> cells;
  std::string bytes;
  friend bool operator==(const Content&, const Content&) = default;
};

Content ContentOf(const KvCache& cache, SeqId seq) {
  std::span<const TokenPos> cells = cache.table().Cells(seq);
  return Content{{cells.begin(), cells.end()}, SequenceBytes(cache, seq)};
}

Status LoadOnThread(RestoreJob* job) {
  Status status;
  std::thread io([&] { status = job->Load(); });
  io.join();
  return status;
}

// 16 pages: seqs 1 and 2 hold 5 each, the target 5, one page is free. No
// tier can take anything, so a 6-page file fits only in the target's pages.
class KvVaultReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = state_test::MakeCache(SmallLayout(), kNumPages, kPageSize);
    source_ = state_test::MakeCache(SmallLayout(), 64, kPageSize);
    ASSERT_TRUE(env_.CreateDir("/saved").ok());
    KvVaultOptions o;
    o.env = &env_;
    o.fingerprint = kTestFingerprint;
    auto vault = KvVault::Create(cache_.get(), o);
    ASSERT_TRUE(vault.ok()) << vault.status();
    vault_ = std::move(vault).value();
    for (uint32_t id : {1u, 2u, kTarget.value()}) {
      AppendRandom(cache_.get(), SeqId(id), 20, 1000 + id);
      vault_->Touch(SeqId(id));
    }
    ASSERT_EQ(cache_->pool().num_free_pages(), 1u);
    target_before_ = ContentOf(*cache_, kTarget);
  }

  // Writes a random `num_tokens`-token file in 4-token chunks to
  // /saved/<name>; remembers its content as saved_[name].
  // Opens `path` and begins its restore into `seq` under `scratch`.
  StatusOr<std::unique_ptr<RestoreJob>> BeginRestoreAt(SeqId seq,
                                                       const std::string& path,
                                                       SeqId scratch) {
    return vault_->BeginRestore(seq, env_.NewRandomAccessFile(path), path,
                                scratch);
  }

  std::string SavedFile(const std::string& name, uint64_t num_tokens) {
    const SeqId seq(static_cast<uint32_t>(saved_.size() + 1));
    AppendRandom(source_.get(), seq, num_tokens, 5000 + seq.value());
    saved_[name] = ContentOf(*source_, seq);
    SaveOptions options;
    options.target_chunk_bytes = kChunkBytes;
    const std::string path = "/saved/" + name;
    auto saved = SaveSequenceToFile(&env_, *source_, seq, kTestFingerprint,
                                    path, options);
    EXPECT_TRUE(saved.ok()) << saved.status();
    return path;
  }

  // Flips one bit of the file at `path`, `offset` bytes from its start (or
  // from its end when negative).
  void FlipBit(const std::string& path, int64_t offset) {
    auto bytes = ReadFileToString(&env_, path);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const int64_t at =
        offset >= 0 ? offset : static_cast<int64_t>(bytes->size()) + offset;
    (*bytes)[at] ^= 0x10;
    ASSERT_TRUE(WriteStringToFile(&env_, *bytes, path, true).ok());
  }

  // BeginRestore, Load on another thread, EndRestore.
  StatusOr<VaultRestoreResult> RestoreAsync(const std::string& path) {
    auto job = BeginRestoreAt(kTarget, path, kScratch);
    if (!job.ok()) return job.status();
    const Status loaded = LoadOnThread(job->get());
    return vault_->EndRestore(std::move(job).value(), loaded);
  }

  FaultInjectingEnv env_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvCache> source_;
  std::unique_ptr<KvVault> vault_;
  Content target_before_;
  std::map<std::string, Content> saved_;
};

TEST_F(KvVaultReuseTest, RestoreFitsOnlyInTheTargetsPagesAndReplacesIt) {
  const Content seq1 = ContentOf(*cache_, SeqId(1));
  const Content seq2 = ContentOf(*cache_, SeqId(2));
  auto restored = vault_->Restore(kTarget, SavedFile("six_pages", 24));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->reused_target_pages);
  EXPECT_EQ(restored->num_tokens, 24u);
  EXPECT_TRUE(restored->evicted.empty());
  EXPECT_TRUE(ContentOf(*cache_, kTarget) == saved_["six_pages"]);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == seq1);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(2)) == seq2);
  EXPECT_EQ(cache_->pool().num_free_pages(), 0u);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
  EXPECT_EQ(vault_->Stats().restores_ok, 1u);
}

// The asynchronous path moves nothing until EndRestore: after Load the
// target still holds its old KV.
TEST_F(KvVaultReuseTest, AsyncRestoreTouchesTheTargetOnlyAtCommit) {
  auto job = BeginRestoreAt(kTarget, SavedFile("six_pages", 24), kScratch);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(cache_->table().Contains(kScratch));  // nothing reserved
  const Status loaded = LoadOnThread(job->get());
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_TRUE(ContentOf(*cache_, kTarget) == target_before_);
  auto restored = vault_->EndRestore(std::move(job).value(), loaded);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->reused_target_pages);
  EXPECT_TRUE(ContentOf(*cache_, kTarget) == saved_["six_pages"]);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// A bit flipped in the first or the last chunk, or a read error at the
// third: the restore fails with its reason and the cache is unchanged.
TEST_F(KvVaultReuseTest, BadFileLeavesTheTargetsOldKv) {
  struct Case {
    std::string name;
    int64_t flip_at;     // 0: no flip
    uint64_t fail_read;  // 0: no read error; else the n-th read in Load
    StatusCode code;
  };
  const int64_t first_chunk = 128 + 8 * 24 + 8 + 100;
  const int64_t last_payload_byte = -int64_t{kTrailerBytes + 8 + 1};
  const std::vector<Case> cases = {
      {"first_chunk", first_chunk, 0, StatusCode::kCorruption},
      {"last_chunk", last_payload_byte, 0, StatusCode::kCorruption},
      {"read_error", 0, 3, StatusCode::kIOError},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = SavedFile(c.name, 24);
    if (c.flip_at != 0) FlipBit(path, c.flip_at);
    const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
    auto job = BeginRestoreAt(kTarget, path, kScratch);
    ASSERT_TRUE(job.ok()) << job.status();
    if (c.fail_read != 0) env_.FailNthRead(c.fail_read);
    const Status loaded = LoadOnThread(job->get());
    env_.ClearFaults();
    auto restored = vault_->EndRestore(std::move(job).value(), loaded);
    ASSERT_FALSE(restored.ok());
    EXPECT_EQ(restored.status().code(), c.code) << restored.status();
    if (c.code == StatusCode::kCorruption) {
      EXPECT_EQ(restored.status().reason(), kReasonChecksumMismatch);
    }
    EXPECT_EQ(
        state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)),
        "");
    EXPECT_TRUE(ContentOf(*cache_, kTarget) == target_before_);
  }
  // The synchronous path too.
  const std::string bad = SavedFile("sync_bad", 24);
  FlipBit(bad, last_payload_byte);
  auto restored = vault_->Restore(kTarget, bad);
  EXPECT_EQ(restored.status().reason(), kReasonChecksumMismatch)
      << restored.status();
  EXPECT_TRUE(ContentOf(*cache_, kTarget) == target_before_);
  EXPECT_EQ(vault_->Stats().restores_failed, 4u);
}

// Other sequences keep growing while the file is read; when they take the
// free page, the commit refuses and the target keeps its old KV.
TEST_F(KvVaultReuseTest, PoolFilledWhileLoadingFailsWithNoRoom) {
  auto job = BeginRestoreAt(kTarget, SavedFile("six_pages", 24), kScratch);
  ASSERT_TRUE(job.ok()) << job.status();
  const Status loaded = LoadOnThread(job->get());
  ASSERT_TRUE(loaded.ok()) << loaded;
  AppendRandom(cache_.get(), SeqId(1), 4, 77);  // the last free page
  auto restored = vault_->EndRestore(std::move(job).value(), loaded);
  ASSERT_TRUE(restored.status().IsResourceExhausted()) << restored.status();
  EXPECT_NE(restored.status().message().find("seq#9 is unchanged"),
            std::string::npos)
      << restored.status();
  EXPECT_TRUE(ContentOf(*cache_, kTarget) == target_before_);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// 7 pages > the free page + the target's 5: refused before anything moves;
// a job aborted before Load (a timed-out restore) changes nothing either.
TEST_F(KvVaultReuseTest, TooBigOrAbortedChangesNothing) {
  const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
  auto too_big = vault_->Restore(kTarget, SavedFile("seven_pages", 28));
  ASSERT_TRUE(too_big.status().IsResourceExhausted()) << too_big.status();
  auto job = BeginRestoreAt(kTarget, SavedFile("six_pages", 24), kScratch);
  ASSERT_TRUE(job.ok()) << job.status();
  auto aborted =
      vault_->EndRestore(std::move(job).value(), CancelledError("timed out"));
  EXPECT_EQ(aborted.status().code(), StatusCode::kCancelled)
      << aborted.status();
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");
}

}  // namespace
}  // namespace kvault
