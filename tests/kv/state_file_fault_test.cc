// Fault injection for state files: every failing write/sync/rename of a
// save, a crash at every step, truncation, bit flips and failing reads of a
// restore. A save must leave the previous file intact; a restore must leave
// the cache byte-for-byte unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "kv/state_file.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::CacheSnapshot;
using state_test::DiffSnapshots;
using state_test::kTestFingerprint;
using state_test::MakeCache;
using state_test::SequenceBytes;
using state_test::SmallLayout;
using state_test::TakeSnapshot;

constexpr char kDir[] = "/d";
constexpr char kPath[] = "/d/slot";
constexpr uint64_t kTokensPerChunk = 10;

// 100 tokens of 512 bytes in chunks of 10: 10 chunks, 14 appends a save.
SaveOptions TestSaveOptions() {
  SaveOptions options;
  options.target_chunk_bytes = kTokensPerChunk * SmallLayout().cell_bytes();
  return options;
}

// A cache holding seq 1 (100 tokens: what the saves write), seq 2 (37
// tokens: what the previous file holds) and seq 3 (an idle bystander).
std::unique_ptr<KvCache> MakeSourceCache() {
  auto cache = MakeCache(SmallLayout(), 128, 4);
  AppendRandom(cache.get(), SeqId(1), 100, 1);
  AppendRandom(cache.get(), SeqId(2), 37, 2);
  AppendRandom(cache.get(), SeqId(3), 21, 3);
  return cache;
}

Status Save(FaultInjectingEnv* env, const KvCache& cache, SeqId seq) {
  return SaveSequenceToFile(env, cache, seq, kTestFingerprint, kPath,
                            TestSaveOptions())
      .status();
}

// A fresh env with a durable directory; with `old_seq` the target already
// holds that sequence's file, durably.
std::unique_ptr<FaultInjectingEnv> MakeEnv(const KvCache& cache,
                                           std::optional<SeqId> old_seq) {
  auto env = std::make_unique<FaultInjectingEnv>();
  KV_CHECK_OK(env->CreateDir(kDir));
  KV_CHECK_OK(env->SyncDir("/"));
  if (old_seq) KV_CHECK_OK(Save(env.get(), cache, *old_seq));
  return env;
}

std::vector<std::string> Children(FaultInjectingEnv* env) {
  StatusOr<std::vector<std::string>> names = env->GetChildren(kDir);
  KV_CHECK(names.ok()) << names.status();
  return *names;
}

class SaveFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = MakeSourceCache();
    old_file_ = state_test::SaveToString(*cache_, SeqId(2), TestSaveOptions());
    env_ = MakeEnv(*cache_, SeqId(2));
  }

  // Returns how many calls of one kind a clean save makes.
  uint64_t CountOps(uint64_t (FaultInjectingEnv::*counter)() const) {
    auto env = MakeEnv(*cache_, std::nullopt);
    const uint64_t before = (env.get()->*counter)();
    KV_CHECK_OK(Save(env.get(), *cache_, SeqId(1)));
    return (env.get()->*counter)() - before;
  }

  // A failed save: the given code, the path named, the old file intact and
  // no temporary file left.
  void ExpectFailedCleanly(const Status& s, StatusCode code) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(kPath), std::string::npos) << s;
    EXPECT_NE(s.message().find("injected fault"), std::string::npos) << s;
    StatusOr<std::string> now = ReadFileToString(env_.get(), kPath);
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_TRUE(*now == old_file_) << "target changed";
    EXPECT_EQ(Children(env_.get()), std::vector<std::string>{"slot"});
  }

  std::unique_ptr<KvCache> cache_;
  std::string old_file_;
  std::unique_ptr<FaultInjectingEnv> env_;
};

TEST_F(SaveFaultTest, EveryFailingAppendKeepsTheOldFile) {
  const uint64_t num_appends = CountOps(&FaultInjectingEnv::num_appends);
  ASSERT_EQ(num_appends, 14u);  // header, tokens, token sum, 10 chunks, trailer
  for (uint64_t n = 1; n <= num_appends; ++n) {
    for (FaultKind kind : {FaultKind::kNoSpace, FaultKind::kIOError}) {
      for (size_t partial : {size_t{0}, size_t{5}}) {
        SCOPED_TRACE("append " + std::to_string(n) + " partial " +
                     std::to_string(partial) +
                     (kind == FaultKind::kNoSpace ? " ENOSPC" : " EIO"));
        env_->FailNthWrite(n, {.kind = kind, .num_partial_bytes = partial});
        ExpectFailedCleanly(Save(env_.get(), *cache_, SeqId(1)),
                            kind == FaultKind::kNoSpace
                                ? StatusCode::kResourceExhausted
                                : StatusCode::kIOError);
        env_->ClearFaults();
      }
    }
  }
  ASSERT_TRUE(Save(env_.get(), *cache_, SeqId(1)).ok());  // still works
  EXPECT_EQ(*ReadFileToString(env_.get(), kPath),
            state_test::SaveToString(*cache_, SeqId(1), TestSaveOptions()));
}

TEST_F(SaveFaultTest, StickyWriteFaultKeepsTheOldFile) {
  env_->FailNthWrite(3, {.kind = FaultKind::kNoSpace, .sticky = true});
  ExpectFailedCleanly(Save(env_.get(), *cache_, SeqId(1)),
                      StatusCode::kResourceExhausted);
}

TEST_F(SaveFaultTest, FailingSyncOrRenameKeepsTheOldFile) {
  ASSERT_EQ(CountOps(&FaultInjectingEnv::num_syncs), 1u);
  ASSERT_EQ(CountOps(&FaultInjectingEnv::num_renames), 1u);
  for (FaultKind kind : {FaultKind::kNoSpace, FaultKind::kIOError}) {
    const StatusCode code = kind == FaultKind::kNoSpace
                                ? StatusCode::kResourceExhausted
                                : StatusCode::kIOError;
    env_->FailNthSync(1, {.kind = kind});
    ExpectFailedCleanly(Save(env_.get(), *cache_, SeqId(1)), code);
    env_->FailNthRename(1, {.kind = kind});
    ExpectFailedCleanly(Save(env_.get(), *cache_, SeqId(1)), code);
    env_->ClearFaults();
  }
}

TEST_F(SaveFaultTest, FailingDirSyncReportsTheErrorAndACrashKeepsTheOld) {
  ASSERT_EQ(CountOps(&FaultInjectingEnv::num_dir_syncs), 1u);
  env_->FailNthSyncDir(1, {.kind = FaultKind::kIOError});
  Status s = Save(env_.get(), *cache_, SeqId(1));
  EXPECT_TRUE(s.IsIOError()) << s;
  EXPECT_NE(s.message().find(kPath), std::string::npos) << s;
  // The rename happened (it cannot be taken back) but is not durable.
  EXPECT_EQ(Children(env_.get()), std::vector<std::string>{"slot"});
  EXPECT_EQ(*ReadFileToString(env_.get(), kPath),
            state_test::SaveToString(*cache_, SeqId(1), TestSaveOptions()));
  env_->SimulateCrash();
  EXPECT_TRUE(*ReadFileToString(env_.get(), kPath) == old_file_);
  EXPECT_EQ(Children(env_.get()), std::vector<std::string>{"slot"});
}

// One point of a save at which the machine crashes: the first call of
// `kind` numbered `n` fails, and so does every later one, as if the machine
// stopped there; kNone crashes after a complete save.
enum class CrashAt { kAppend, kSync, kRename, kSyncDir, kNone };
struct CrashPoint {
  CrashAt at;
  uint64_t n;
};

class SaveCrashTest : public ::testing::TestWithParam<bool> {};

TEST_P(SaveCrashTest, TargetIsTheOldOrTheNewFileAfterACrashAtEveryStep) {
  const bool with_old = GetParam();
  auto cache = MakeSourceCache();
  const std::string old_file =
      state_test::SaveToString(*cache, SeqId(2), TestSaveOptions());
  const std::string new_file =
      state_test::SaveToString(*cache, SeqId(1), TestSaveOptions());
  std::vector<CrashPoint> points;
  for (uint64_t n = 1; n <= 14; ++n) points.push_back({CrashAt::kAppend, n});
  for (CrashAt at :
       {CrashAt::kSync, CrashAt::kRename, CrashAt::kSyncDir, CrashAt::kNone}) {
    points.push_back({at, 1});
  }
  int num_new = 0;
  for (const CrashPoint& p : points) {
    SCOPED_TRACE("crash point " + std::to_string(int(p.at)) + "/" +
                 std::to_string(p.n));
    auto env =
        MakeEnv(*cache, with_old ? std::optional(SeqId(2)) : std::nullopt);
    const FaultSpec stop{.kind = FaultKind::kIOError, .sticky = true};
    switch (p.at) {
      case CrashAt::kAppend:
        env->FailNthWrite(p.n, stop);
        break;
      case CrashAt::kSync:
        env->FailNthSync(p.n, stop);
        break;
      case CrashAt::kRename:
        env->FailNthRename(p.n, stop);
        break;
      case CrashAt::kSyncDir:
        env->FailNthSyncDir(p.n, stop);
        break;
      case CrashAt::kNone:
        break;
    }
    EXPECT_EQ(Save(env.get(), *cache, SeqId(1)).ok(), p.at == CrashAt::kNone);
    env->SimulateCrash();
    env->ClearFaults();
    EXPECT_EQ(Children(env.get()).size(),
              with_old || p.at == CrashAt::kNone ? 1u : 0u);
    if (!env->FileExists(kPath)) continue;
    const std::string after = *ReadFileToString(env.get(), kPath);
    ASSERT_TRUE(after == old_file || after == new_file) << "a mixed file";
    num_new += after == new_file;
    auto target = MakeCache(SmallLayout(), 128, 4);
    StatusOr<RestoreResult> r = RestoreSequenceFromFile(
        env.get(), kPath, kTestFingerprint, SeqId(7), target.get());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(SequenceBytes(*target, SeqId(7)),
              SequenceBytes(*cache, SeqId(after == new_file ? 1 : 2)));
  }
  EXPECT_EQ(num_new, 1);  // only a completed save survives as the new file
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutOldFile, SaveCrashTest,
                         ::testing::Bool());

class RestoreFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = MakeSourceCache();
    file_ = state_test::SaveToString(*source_, SeqId(1), TestSaveOptions());
    // The cache restored into: seq 1 holds other data (the target), seq 4
    // is a bystander; room for the restore is left.
    cache_ = MakeCache(SmallLayout(), 128, 4);
    AppendRandom(cache_.get(), SeqId(1), 30, 11);
    AppendRandom(cache_.get(), SeqId(4), 50, 12);
    before_ = TakeSnapshot(*cache_);
  }

  Status RestoreBytes(std::string bytes) {
    return RestoreSequence(*state_test::StringFile(std::move(bytes)),
                           kTestFingerprint, SeqId(1), cache_.get())
        .status();
  }
  void ExpectUnchanged() {
    EXPECT_EQ(DiffSnapshots(before_, TakeSnapshot(*cache_)), "");
    EXPECT_FALSE(cache_->table().Contains(kRestoreScratchSeq));
  }

  std::unique_ptr<KvCache> source_;
  std::string file_;
  std::unique_ptr<KvCache> cache_;
  CacheSnapshot before_;
};

// Offsets where a file may be cut: every section and chunk boundary.
std::vector<uint64_t> Boundaries(const StateHeader& h) {
  std::vector<uint64_t> cuts = {0, 1, 8, 127, 128, 136};
  cuts.push_back(128 + 8 * h.num_tokens);  // the token checksum
  cuts.push_back(128 + 8 * h.num_tokens + 8);
  for (uint64_t c = 0; c < h.num_chunks(); ++c) {
    const uint64_t payload_end =
        h.chunk_offset(c) + h.chunk_tokens(c) * h.layout.cell_bytes();
    cuts.insert(cuts.end(), {h.chunk_offset(c), h.chunk_offset(c) + 1,
                             payload_end, payload_end + 4});
  }
  const uint64_t end = h.file_bytes();
  cuts.insert(cuts.end(), {end - 24, end - 16, end - 8, end - 1});
  return cuts;
}

TEST_F(RestoreFaultTest, TruncationAtBoundariesAndRandomOffsets) {
  StatusOr<StateHeader> h = ReadStateHeader(*state_test::StringFile(file_));
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->num_chunks(), 10u);
  std::vector<uint64_t> cuts = Boundaries(*h);
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 200; ++i) cuts.push_back(rng() % file_.size());
  for (uint64_t cut : cuts) {
    SCOPED_TRACE("truncated to " + std::to_string(cut) + " (seed 20240601)");
    Status s = RestoreBytes(file_.substr(0, cut));
    EXPECT_TRUE(s.IsCorruption()) << s;
    EXPECT_EQ(s.reason(), kReasonTruncated) << s;
    ExpectUnchanged();
  }
  ASSERT_TRUE(RestoreBytes(file_).ok());
}

// A file whose size() is stale: it shrank after it was opened.
class ShrunkFile final : public RandomAccessFile {
 public:
  ShrunkFile(std::string data, uint64_t size)
      : data_(std::move(data)), size_(size) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    if (offset >= data_.size()) return size_t{0};
    const size_t n = std::min<uint64_t>(out.size(), data_.size() - offset);
    std::memcpy(out.data(), data_.data() + offset, n);
    return n;
  }
  uint64_t size() const override { return size_; }

 private:
  std::string data_;
  uint64_t size_;
};

TEST_F(RestoreFaultTest, FileShrinkingDuringTheReadIsTruncatedWithOffset) {
  StatusOr<StateHeader> h = ReadStateHeader(*state_test::StringFile(file_));
  ASSERT_TRUE(h.ok());
  for (uint64_t c = 0; c < h->num_chunks(); ++c) {
    SCOPED_TRACE("shrunk to chunk " + std::to_string(c));
    // Cut at the chunk; the reader first notices at the trailer.
    std::string data = file_.substr(0, h->chunk_offset(c));
    ShrunkFile shrunk(data, file_.size());
    Status s = RestoreSequence(shrunk, kTestFingerprint, SeqId(1), cache_.get())
                   .status();
    EXPECT_TRUE(s.IsCorruption()) << s;
    EXPECT_EQ(s.reason(), kReasonTruncated) << s;
    EXPECT_NE(s.message().find("offset"), std::string::npos) << s;
    ExpectUnchanged();
  }
}

TEST_F(RestoreFaultTest, ShrinkInsideAChunkAfterTheTrailerWasRead) {
  // The trailer read succeeds (the file was whole then); chunk 4 comes back
  // short.
  class ShrinksAtChunk final : public RandomAccessFile {
   public:
    ShrinksAtChunk(const std::string& data, uint64_t cut)
        : data_(data), cut_(cut) {}
    StatusOr<size_t> ReadAt(uint64_t offset,
                            std::span<std::byte> out) const override {
      const uint64_t end =
          offset + out.size() >= data_.size() ? data_.size() : cut_;
      if (offset >= end) return size_t{0};
      const size_t n = std::min<uint64_t>(out.size(), end - offset);
      std::memcpy(out.data(), data_.data() + offset, n);
      return n;
    }
    uint64_t size() const override { return data_.size(); }

   private:
    const std::string& data_;
    uint64_t cut_;
  };
  StatusOr<StateHeader> h = ReadStateHeader(*state_test::StringFile(file_));
  ASSERT_TRUE(h.ok());
  const uint64_t cut = h->chunk_offset(4) + 1000;
  ShrinksAtChunk file(file_, cut);
  Status s =
      RestoreSequence(file, kTestFingerprint, SeqId(1), cache_.get()).status();
  EXPECT_EQ(s.reason(), kReasonTruncated) << s;
  EXPECT_NE(s.message().find("chunk 4 of 10 at offset " +
                             std::to_string(h->chunk_offset(4))),
            std::string::npos)
      << s;
  ExpectUnchanged();
}

TEST_F(RestoreFaultTest, ThousandSingleBitFlipsAreAllRejected) {
  constexpr uint64_t kSeed = 77;
  std::mt19937_64 rng(kSeed);
  std::string bad = file_;
  int num_chunk_errors = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const uint64_t offset = rng() % file_.size();
    const int bit = static_cast<int>(rng() % 8);
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " trial " +
                 std::to_string(trial) + ": bit " + std::to_string(bit) +
                 " of byte " + std::to_string(offset));
    bad[offset] = static_cast<char>(bad[offset] ^ (1 << bit));
    Status s = RestoreBytes(bad);
    bad[offset] = file_[offset];
    ASSERT_TRUE(s.IsCorruption()) << s;
    ASSERT_FALSE(s.message().empty());
    const bool locates = s.message().find("offset") != std::string::npos ||
                         s.message().find("bytes [") != std::string::npos;
    EXPECT_TRUE(locates) << s;
    num_chunk_errors += s.message().find("chunk") != std::string::npos;
    // Snapshots are costly; every flip goes through the same rollback path.
    if (trial % 10 == 0) ExpectUnchanged();
  }
  ExpectUnchanged();
  EXPECT_GT(num_chunk_errors, 900);  // chunks are most of the file
}

TEST_F(RestoreFaultTest, FailingReadsAreIOErrorsWithOffsets) {
  FaultInjectingEnv env;
  ASSERT_TRUE(WriteStringToFile(&env, file_, "/f", false).ok());
  const uint64_t before = env.num_reads();
  {
    auto scratch = MakeCache(SmallLayout(), 128, 4);
    ASSERT_TRUE(RestoreSequenceFromFile(&env, "/f", kTestFingerprint, SeqId(1),
                                        scratch.get())
                    .ok());
  }
  const uint64_t num_reads = env.num_reads() - before;
  ASSERT_EQ(num_reads, 13u);  // header, trailer, token table, 10 chunks
  for (uint64_t n = 1; n <= num_reads; ++n) {
    SCOPED_TRACE("read " + std::to_string(n));
    env.FailNthRead(n);
    Status s = RestoreSequenceFromFile(&env, "/f", kTestFingerprint, SeqId(1),
                                       cache_.get())
                   .status();
    env.ClearFaults();
    EXPECT_TRUE(s.IsIOError()) << s;
    EXPECT_EQ(s.message().substr(0, 4), "/f: ") << s;
    EXPECT_NE(s.message().find(" at offset "), std::string::npos) << s;
    ExpectUnchanged();
  }
}

}  // namespace
}  // namespace kvault
