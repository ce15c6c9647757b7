// DiskTier: put/open/remove, atomic durable writes under injected faults and
// crashes, and the index rebuilt by scanning the directory after a restart.
#include "kv/disk_tier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "core/log.h"
#include "core/memory_file.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

constexpr ModelFingerprint kModel{0x1234, 0x5678};
constexpr char kDir[] = "/spill";
const KvLayout kLayout{2, 2, 32, 32, KvDtype::kF16};

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KvCacheOptions o;
    o.num_pages = 32;
    o.page_size = 4;
    o.layout = kLayout;
    auto cache = KvCache::Create(o);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(cache).value();
  }

  // Appends `num_tokens` tokens of random K/V bytes (seeded by `seed`).
  void Fill(SeqId seq, int num_tokens, uint32_t seed) {
    std::vector<TokenPos> tokens;
    for (int i = 0; i < num_tokens; ++i) tokens.push_back({int(seed) + i, i});
    auto cells = cache_->Append(seq, tokens);
    ASSERT_TRUE(cells.ok()) << cells.status();
    std::mt19937 rng(seed);
    for (CellId cell : *cells) {
      for (uint32_t layer = 0; layer < 2; ++layer) {
        for (std::byte& b : cache_->storage()->Rows(KvSide::kK, layer, cell))
          b = std::byte(rng());
        for (std::byte& b : cache_->storage()->Rows(KvSide::kV, layer, cell))
          b = std::byte(rng());
      }
    }
  }

  // Returns a write function producing `seq`'s state file for `model`.
  SpillWriteFn Writer(SeqId seq, ModelFingerprint model = kModel) {
    return [this, seq, model](WritableFile* out) {
      return WriteSequenceState(*cache_, seq, model, SaveOptions{}, out);
    };
  }

  // Returns `seq`'s state file as bytes.
  std::string StateOf(SeqId seq) {
    std::string bytes;
    StringWritableFile file(&bytes);
    EXPECT_TRUE(
        WriteSequenceState(*cache_, seq, kModel, SaveOptions{}, &file).ok());
    return bytes;
  }

  std::unique_ptr<DiskTier> OpenTier(uint64_t budget = 1 << 20) {
    auto tier = DiskTier::Open(&env_, kDir, budget, kLayout, kModel);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }

  // Returns the names in kDir.
  std::vector<std::string> Names() {
    auto names = env_.GetChildren(kDir);
    EXPECT_TRUE(names.ok()) << names.status();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  // Returns the contents of `seq`'s file ("<missing>" when absent).
  std::string FileOf(SeqId seq) {
    const std::string path = JoinPath(kDir, DiskTierFileName(seq));
    if (!env_.FileExists(path)) return "<missing>";
    auto s = ReadFileToString(&env_, path);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : "<error>";
  }

  FaultInjectingEnv env_;
  std::unique_ptr<KvCache> cache_;
};

TEST(DiskTierFileNameTest, RoundTripsAndRejectsOtherNames) {
  EXPECT_EQ(DiskTierFileName(SeqId(42)), "seq-42.kvstate");
  EXPECT_EQ(ParseDiskTierFileName("seq-42.kvstate"), SeqId(42));
  EXPECT_EQ(ParseDiskTierFileName("seq-4294967295.kvstate"), SeqId(UINT32_MAX));
  for (const char* bad :
       {"seq-.kvstate", "seq-042.kvstate", "seq-4294967296.kvstate",
        "seq-1x.kvstate", "seq-1.kvstate.tmp-1-2", "x-1.kvstate",
        "seq-99999999999.kvstate", "seq--1.kvstate"}) {
    EXPECT_FALSE(ParseDiskTierFileName(bad).has_value()) << bad;
  }
}

TEST_F(DiskTierTest, PutOpenRemove) {
  Fill(SeqId(3), 9, 3);
  const std::string state = StateOf(SeqId(3));
  auto tier = OpenTier();
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->name(), "disk");
  auto info = tier->Put(SeqId(3), 5, Writer(SeqId(3)));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_bytes, state.size());
  EXPECT_EQ(info->num_tokens, 9u);
  EXPECT_EQ(tier->used_bytes(), state.size());
  EXPECT_EQ(Names(), std::vector<std::string>{"seq-3.kvstate"});
  EXPECT_EQ(FileOf(SeqId(3)), state);
  auto file = tier->Open(SeqId(3));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), state.size());
  ASSERT_TRUE(tier->Remove(SeqId(3)).ok());
  EXPECT_FALSE(tier->Contains(SeqId(3)));
  EXPECT_EQ(tier->used_bytes(), 0u);
  EXPECT_TRUE(Names().empty());
  EXPECT_TRUE(tier->Open(SeqId(3)).status().IsNotFound());
}

TEST_F(DiskTierTest, OverBudgetPutLeavesNoFile) {
  Fill(SeqId(1), 8, 1);
  const uint64_t size = StateOf(SeqId(1)).size();
  auto tier = OpenTier(size - 1);
  ASSERT_NE(tier, nullptr);
  auto put = tier->Put(SeqId(1), 1, Writer(SeqId(1)));
  EXPECT_TRUE(put.status().IsResourceExhausted()) << put.status();
  EXPECT_TRUE(Names().empty());
  EXPECT_EQ(tier->used_bytes(), 0u);
}

TEST_F(DiskTierTest, ForeignStateIsRejectedBeforeCommit) {
  Fill(SeqId(1), 4, 1);
  auto tier = OpenTier();
  ASSERT_NE(tier, nullptr);
  auto put = tier->Put(SeqId(1), 1, Writer(SeqId(1), ModelFingerprint{9, 9}));
  EXPECT_EQ(put.status().reason(), kReasonModelMismatch) << put.status();
  EXPECT_TRUE(Names().empty());
}

// Every failing append, sync, rename or directory sync of a replacing Put:
// nothing changes (the old entry stays, no temporary file is left) except
// when only the final directory sync fails, which drops the entry.
TEST_F(DiskTierTest, FailedWritesStoreNothingAndLeaveNoTempFile) {
  Fill(SeqId(1), 6, 1);
  const std::string old_state = StateOf(SeqId(1));
  auto tier = OpenTier();
  ASSERT_NE(tier, nullptr);
  ASSERT_TRUE(tier->Put(SeqId(1), 1, Writer(SeqId(1))).ok());
  Fill(SeqId(1), 6, 2);  // the replacement is longer
  const uint64_t appends_before = env_.num_appends();
  ASSERT_TRUE(tier->Put(SeqId(1), 2, Writer(SeqId(1))).ok());
  const uint64_t num_appends = env_.num_appends() - appends_before;
  ASSERT_GT(num_appends, 0u);
  ASSERT_TRUE(tier->Put(SeqId(1), 1,
                        [&](WritableFile* out) -> StatusOr<uint64_t> {
                          KV_RETURN_IF_ERROR(
                              out->Append(std::string_view(old_state)));
                          return old_state.size();
                        })
                  .ok());
  for (uint64_t n = 1; n <= num_appends + 3; ++n) {
    SCOPED_TRACE("fault " + std::to_string(n));
    if (n <= num_appends) {
      env_.FailNthWrite(n, {FaultKind::kNoSpace, false, 3});
    } else if (n == num_appends + 1) {
      env_.FailNthSync(1);
    } else if (n == num_appends + 2) {
      env_.FailNthRename(1);
    } else {
      env_.FailNthSyncDir(1);
    }
    auto put = tier->Put(SeqId(1), 2, Writer(SeqId(1)));
    env_.ClearFaults();
    EXPECT_FALSE(put.ok());
    if (n <= num_appends + 2) {
      EXPECT_EQ(Names(), std::vector<std::string>{"seq-1.kvstate"});
      EXPECT_EQ(FileOf(SeqId(1)), old_state);
      ASSERT_TRUE(tier->Contains(SeqId(1)));
      EXPECT_EQ(tier->used_bytes(), old_state.size());
    } else {
      EXPECT_TRUE(Names().empty());
      EXPECT_FALSE(tier->Contains(SeqId(1)));
      EXPECT_EQ(tier->used_bytes(), 0u);
    }
  }
}

TEST_F(DiskTierTest, IndexIsRebuiltAfterRestart) {
  Fill(SeqId(7), 5, 7);
  Fill(SeqId(2), 11, 2);
  {
    auto tier = OpenTier();
    ASSERT_NE(tier, nullptr);
    ASSERT_TRUE(tier->Put(SeqId(7), 100, Writer(SeqId(7))).ok());
    ASSERT_TRUE(tier->Put(SeqId(2), 200, Writer(SeqId(2))).ok());
  }
  env_.SimulateCrash();  // everything Put returned OK for is durable
  auto tier = OpenTier();
  ASSERT_NE(tier, nullptr);
  const std::vector<SpillEntryInfo> entries = tier->Entries();
  ASSERT_EQ(entries.size(), 2u);
  // After a restart the LRU order is by sequence id.
  EXPECT_EQ(entries[0].seq, SeqId(2));
  EXPECT_EQ(entries[0].num_tokens, 11u);
  EXPECT_EQ(entries[0].num_bytes, StateOf(SeqId(2)).size());
  EXPECT_EQ(entries[1].seq, SeqId(7));
  EXPECT_EQ(entries[1].num_tokens, 5u);
  EXPECT_EQ(tier->used_bytes(), entries[0].num_bytes + entries[1].num_bytes);
  EXPECT_EQ(FileOf(SeqId(7)), StateOf(SeqId(7)));
}

TEST_F(DiskTierTest, RebuildSkipsBadFilesAndRemovesStrayTemps) {
  Fill(SeqId(1), 4, 1);
  {
    auto tier = OpenTier();
    ASSERT_NE(tier, nullptr);
    ASSERT_TRUE(tier->Put(SeqId(1), 1, Writer(SeqId(1))).ok());
  }
  std::string corrupt = StateOf(SeqId(1));
  corrupt[70] ^= 0x01;  // inside the header: checksum mismatch
  std::string foreign;
  StringWritableFile foreign_file(&foreign);
  ASSERT_TRUE(WriteSequenceState(*cache_, SeqId(1), ModelFingerprint{9, 9},
                                 SaveOptions{}, &foreign_file)
                  .ok());
  const std::string dir = kDir;
  ASSERT_TRUE(
      WriteStringToFile(&env_, corrupt, dir + "/seq-2.kvstate", true).ok());
  ASSERT_TRUE(
      WriteStringToFile(&env_, foreign, dir + "/seq-3.kvstate", true).ok());
  ASSERT_TRUE(
      WriteStringToFile(&env_, "x", dir + "/seq-4.kvstate.tmp-9-9", true).ok());
  ASSERT_TRUE(WriteStringToFile(&env_, "notes", dir + "/README", true).ok());

  ScopedLogCapture capture;
  auto tier = OpenTier();
  ASSERT_NE(tier, nullptr);
  ASSERT_EQ(tier->Entries().size(), 1u);
  EXPECT_EQ(tier->Entries()[0].seq, SeqId(1));
  EXPECT_EQ(Names(),
            (std::vector<std::string>{"README", "seq-1.kvstate",
                                      "seq-2.kvstate", "seq-3.kvstate"}));
  auto logged = [&](const std::string& a, const std::string& b) {
    const auto lines = capture.lines();
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
    });
  };
  EXPECT_TRUE(logged("WARNING", "seq-2.kvstate")) << "corrupt file not logged";
  EXPECT_TRUE(logged("seq-2.kvstate", "checksum"));
  EXPECT_TRUE(logged("WARNING", "seq-3.kvstate")) << "foreign file not logged";
  EXPECT_TRUE(logged("seq-3.kvstate", "fingerprint"));
  EXPECT_TRUE(logged("removed temporary file", "seq-4.kvstate.tmp-9-9"));
  EXPECT_TRUE(logged("WARNING", "README"));
}

// A crash at any point of a replacing Put leaves either the old entry or
// the new one, complete, and never a temporary file after the next open.
TEST_F(DiskTierTest, CrashMidPutLeavesOldOrNewEntry) {
  Fill(SeqId(1), 6, 1);
  const std::string old_state = StateOf(SeqId(1));
  Fill(SeqId(1), 3, 2);
  const std::string new_state = StateOf(SeqId(1));
  // Fault points: append k (k = 1..), the file sync, the rename, the
  // directory sync; and "no fault" (the Put completes, then the crash).
  for (int point = 0; point < 12; ++point) {
    SCOPED_TRACE("fault point " + std::to_string(point));
    env_.ClearFaults();
    if (env_.FileExists(kDir)) {
      for (const std::string& name : Names()) {
        ASSERT_TRUE(env_.RemoveFile(JoinPath(kDir, name)).ok());
      }
    }
    {
      auto tier = OpenTier();
      ASSERT_NE(tier, nullptr);
      ASSERT_TRUE(tier->Put(SeqId(1), 1,
                            [&](WritableFile* out) -> StatusOr<uint64_t> {
                              KV_RETURN_IF_ERROR(
                                  out->Append(std::string_view(old_state)));
                              return old_state.size();
                            })
                      .ok());
      if (point < 8) {
        env_.FailNthWrite(point + 1, {FaultKind::kIOError, true, 5});
      } else if (point == 8) {
        env_.FailNthSync(1, {FaultKind::kIOError, true});
      } else if (point == 9) {
        env_.FailNthRename(1, {FaultKind::kIOError, true});
      } else if (point == 10) {
        env_.FailNthSyncDir(1, {FaultKind::kIOError, true});
      }
      (void)tier->Put(SeqId(1), 2, Writer(SeqId(1)));
    }
    env_.SimulateCrash();
    env_.ClearFaults();
    auto tier = OpenTier();
    ASSERT_NE(tier, nullptr);
    const std::string found = FileOf(SeqId(1));
    if (found == "<missing>") {
      EXPECT_FALSE(tier->Contains(SeqId(1)));
    } else {
      EXPECT_TRUE(found == old_state || found == new_state);
      ASSERT_TRUE(tier->Contains(SeqId(1)));
      EXPECT_EQ(tier->Entries()[0].num_bytes, found.size());
    }
    if (point != 10) {
      EXPECT_NE(found, "<missing>");
    }
    if (point == 11) {
      EXPECT_EQ(found, new_state);
    }
    for (const std::string& name : Names()) {
      EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    }
  }
}

}  // namespace
}  // namespace kvault
