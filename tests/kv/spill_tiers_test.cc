// SpillTiers: an entry goes to the first tier with room; a full RAM tier
// demotes its least recently used entries to disk; when every tier is full
// the oldest entry is dropped (counted, logged) or, with drops off, the
// store is refused and nothing changes; entries are removed from every tier.
#include "kv/spill_tiers.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/ram_tier.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::SaveToString;
using state_test::SmallLayout;

constexpr char kSpillDir[] = "/spill";
constexpr uint64_t kNumTokens = 12;
constexpr size_t kRam = 0;  // tier indexes when both tiers are present
constexpr size_t kDisk = 1;

// Returns every byte `file` holds.
std::string ReadAll(const RandomAccessFile& file) {
  std::string out(file.size(), '\0');
  auto n = file.ReadAt(0, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(n.ok() && *n == out.size());
  return out;
}

// A cache holding sequences 1..4 of kNumTokens random tokens each, whose
// state files (all the same size) the tests store into the tiers.
class SpillTiersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = state_test::MakeCache(SmallLayout(), 32, 4);
    for (uint32_t id = 1; id <= 4; ++id) {
      AppendRandom(cache_.get(), SeqId(id), kNumTokens, 100 + id);
    }
    entry_bytes_ = SaveToString(*cache_, SeqId(1)).size();
  }

  // Builds the tiers; a budget of 0 leaves that tier out.
  void MakeTiers(uint64_t ram_budget, uint64_t disk_budget,
                 bool allow_drops = true) {
    std::vector<std::unique_ptr<SpillTier>> tiers;
    if (ram_budget > 0) tiers.push_back(std::make_unique<RamTier>(ram_budget));
    if (disk_budget > 0) {
      auto disk = DiskTier::Open(&env_, kSpillDir, disk_budget, SmallLayout(),
                                 kTestFingerprint);
      ASSERT_TRUE(disk.ok()) << disk.status();
      tiers.push_back(std::move(disk).value());
    }
    tiers_ = std::make_unique<SpillTiers>(std::move(tiers), allow_drops);
  }

  // Stores sequence `id`'s state file as used at `last_use`.
  StatusOr<StoredEntry> Store(uint32_t id, uint64_t last_use) {
    const SeqId seq(id);
    return tiers_->Store(
        seq, last_use, entry_bytes_, [this, seq](WritableFile* out) {
          ++num_writes_;
          return WriteSequenceState(*cache_, seq, kTestFingerprint,
                                    SaveOptions{}, out);
        });
  }

  // Returns the bytes of `id`'s entry in tier `t` ("" when it cannot open).
  std::string EntryOf(size_t t, uint32_t id) {
    auto file = tiers_->Open(t, SeqId(id));
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? ReadAll(**file) : "";
  }

  std::vector<SeqId> Ids(std::vector<uint32_t> ids) {
    std::vector<SeqId> out;
    for (uint32_t id : ids) out.push_back(SeqId(id));
    return out;
  }

  FaultInjectingEnv env_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<SpillTiers> tiers_;
  uint64_t entry_bytes_ = 0;
  int num_writes_ = 0;
};

TEST_F(SpillTiersTest, StoresIntoTheRamTierFirst) {
  MakeTiers(/*ram_budget=*/1 << 20, /*disk_budget=*/1 << 20);
  auto stored = Store(1, /*last_use=*/1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->tier, "ram");
  EXPECT_EQ(stored->info.seq, SeqId(1));
  EXPECT_EQ(stored->info.num_tokens, kNumTokens);
  EXPECT_EQ(stored->info.num_bytes, entry_bytes_);
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::optional<size_t>(kRam));
  EXPECT_EQ(tiers_->TierOf(SeqId(2)), std::nullopt);
  EXPECT_EQ(EntryOf(kRam, 1), SaveToString(*cache_, SeqId(1)));
  EXPECT_EQ(tiers_->Sequences(), Ids({1}));
  const std::vector<TierStats> stats = tiers_->Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[kRam].name, "ram");
  EXPECT_EQ(stats[kRam].num_spills, 1u);
  EXPECT_EQ(stats[kRam].spilled_bytes, entry_bytes_);
  EXPECT_EQ(stats[kRam].used_bytes, entry_bytes_);
  EXPECT_EQ(stats[kRam].num_entries, 1u);
  EXPECT_EQ(stats[kDisk].name, "disk");
  EXPECT_EQ(stats[kDisk].num_spills, 0u);
  EXPECT_EQ(stats[kDisk].num_entries, 0u);
}

TEST_F(SpillTiersTest, FullRamTierDemotesItsLeastRecentlyUsedEntryToDisk) {
  MakeTiers(/*ram_budget=*/2 * entry_bytes_ + 100, /*disk_budget=*/1 << 20);
  ASSERT_TRUE(Store(1, /*last_use=*/5).ok());
  ASSERT_TRUE(Store(2, /*last_use=*/1).ok());  // older than seq 1
  ScopedLogCapture capture(LogLevel::kInfo);
  auto stored = Store(3, /*last_use=*/6);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->tier, "ram");
  EXPECT_EQ(tiers_->TierOf(SeqId(2)), std::optional<size_t>(kDisk));
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::optional<size_t>(kRam));
  EXPECT_EQ(tiers_->TierOf(SeqId(3)), std::optional<size_t>(kRam));
  EXPECT_EQ(EntryOf(kDisk, 2), SaveToString(*cache_, SeqId(2)));
  const std::vector<TierStats> stats = tiers_->Stats();
  EXPECT_EQ(stats[kRam].num_demotions, 1u);
  EXPECT_EQ(stats[kRam].num_spills, 3u);
  EXPECT_EQ(stats[kRam].num_entries, 2u);
  EXPECT_EQ(stats[kDisk].num_spills, 1u);
  EXPECT_EQ(stats[kDisk].spilled_bytes, entry_bytes_);
  EXPECT_EQ(stats[kDisk].num_entries, 1u);
  EXPECT_EQ(stats[kRam].num_drops + stats[kDisk].num_drops, 0u);
  std::vector<std::string> lines;
  for (const std::string& line : capture.lines()) {
    if (line.find("demoted") != std::string::npos) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("demoted seq#2 (" + std::to_string(entry_bytes_) +
                          " bytes) from the ram tier to the disk tier"),
            std::string::npos)
      << lines[0];
}

TEST_F(SpillTiersTest, DropsTheOldestEntryWhenEveryTierIsFull) {
  MakeTiers(entry_bytes_ + 100, entry_bytes_ + 100);  // one entry per tier
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk
  ScopedLogCapture capture(LogLevel::kWarning);
  auto stored = Store(3, 3);  // seq 2 -> disk, seq 1 dropped
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(tiers_->Sequences(), Ids({2, 3}));
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::nullopt);
  EXPECT_EQ(tiers_->TierOf(SeqId(2)), std::optional<size_t>(kDisk));
  const std::vector<TierStats> stats = tiers_->Stats();
  EXPECT_EQ(stats[kDisk].num_drops, 1u);
  EXPECT_EQ(stats[kDisk].dropped_bytes, entry_bytes_);
  EXPECT_EQ(stats[kRam].num_drops, 0u);
  EXPECT_EQ(stats[kRam].num_demotions, 2u);
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("dropped seq#1 (" + std::to_string(kNumTokens) +
                          " tokens, " + std::to_string(entry_bytes_) +
                          " bytes) from the disk tier"),
            std::string::npos)
      << lines[0];
}

TEST_F(SpillTiersTest, RefusesWithResourceExhaustedWhenDropsAreOff) {
  MakeTiers(entry_bytes_ + 100, entry_bytes_ + 100, /*allow_drops=*/false);
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk: no drop needed
  const std::vector<TierStats> before = tiers_->Stats();
  const int writes_before = num_writes_;
  auto refused = Store(3, 3);
  ASSERT_TRUE(refused.status().IsResourceExhausted()) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("evict seq#3 to the ram tier"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the disk tier is full"), std::string::npos)
      << message;
  EXPECT_NE(message.find("dropping spilled KV is off"), std::string::npos)
      << message;
  // Nothing moved, nothing was written.
  EXPECT_EQ(num_writes_, writes_before);
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::optional<size_t>(kDisk));
  EXPECT_EQ(tiers_->TierOf(SeqId(2)), std::optional<size_t>(kRam));
  EXPECT_EQ(tiers_->TierOf(SeqId(3)), std::nullopt);
  const std::vector<TierStats> after = tiers_->Stats();
  for (size_t t : {kRam, kDisk}) {
    EXPECT_EQ(after[t].num_spills, before[t].num_spills);
    EXPECT_EQ(after[t].num_demotions, before[t].num_demotions);
    EXPECT_EQ(after[t].num_drops, 0u);
    EXPECT_EQ(after[t].used_bytes, before[t].used_bytes);
  }
}

TEST_F(SpillTiersTest, EntryLargerThanEveryBudgetIsRefusedUnwritten) {
  MakeTiers(entry_bytes_ - 1, entry_bytes_ - 1);
  auto refused = Store(1, 1);
  ASSERT_TRUE(refused.status().IsResourceExhausted()) << refused.status();
  const std::string budget = std::to_string(entry_bytes_ - 1);
  EXPECT_NE(std::string(refused.status().message())
                .find("exceeds every tier budget (ram " + budget + ", disk " +
                      budget + ")"),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(num_writes_, 0);
  EXPECT_EQ(tiers_->MaxTierBudget(), entry_bytes_ - 1);
  EXPECT_TRUE(tiers_->Sequences().empty());
}

TEST_F(SpillTiersTest, StoringAgainReplacesTheCopyInAnotherTier) {
  MakeTiers(entry_bytes_ + 100, 1 << 20);
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk
  ASSERT_TRUE(Store(1, 3).ok());  // seq 2 -> disk; seq 1's disk copy goes
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::optional<size_t>(kRam));
  EXPECT_EQ(tiers_->TierOf(SeqId(2)), std::optional<size_t>(kDisk));
  const std::vector<TierStats> stats = tiers_->Stats();
  EXPECT_EQ(stats[kDisk].num_entries, 1u);
  EXPECT_EQ(stats[kDisk].used_bytes, entry_bytes_);
  auto names = env_.GetChildren(kSpillDir);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, std::vector<std::string>{DiskTierFileName(SeqId(2))});
}

TEST_F(SpillTiersTest, EraseRemovesFromEveryTier) {
  MakeTiers(entry_bytes_ + 100, 1 << 20);
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk
  EXPECT_TRUE(tiers_->Erase(SeqId(1)).ok());
  EXPECT_TRUE(tiers_->Erase(SeqId(2)).ok());
  EXPECT_TRUE(tiers_->Erase(SeqId(9)).ok());  // absent: a no-op
  EXPECT_TRUE(tiers_->Sequences().empty());
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::nullopt);
  for (const TierStats& t : tiers_->Stats()) {
    EXPECT_EQ(t.used_bytes, 0u) << t.name;
    EXPECT_EQ(t.num_entries, 0u) << t.name;
  }
  auto names = env_.GetChildren(kSpillDir);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_TRUE(names->empty()) << names->front();
}

TEST_F(SpillTiersTest, BroughtBackCountsAndDiscardsTheEntry) {
  MakeTiers(entry_bytes_ + 100, 1 << 20);
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk
  RestoreResult restored;
  restored.num_tokens = kNumTokens;
  restored.bytes_read = entry_bytes_;
  tiers_->BroughtBack(kDisk, SeqId(1), restored);
  EXPECT_EQ(tiers_->TierOf(SeqId(1)), std::nullopt);
  tiers_->DiscardStale(SeqId(2), "restored from /x");
  EXPECT_TRUE(tiers_->Sequences().empty());
  const std::vector<TierStats> stats = tiers_->Stats();
  EXPECT_EQ(stats[kDisk].num_bring_backs, 1u);
  EXPECT_EQ(stats[kRam].num_bring_backs, 0u);
}

TEST_F(SpillTiersTest, CopyToWritesTheEntryBytes) {
  MakeTiers(entry_bytes_ + 100, 1 << 20);
  ASSERT_TRUE(Store(1, 1).ok());
  ASSERT_TRUE(Store(2, 2).ok());  // seq 1 -> disk
  for (uint32_t id : {1u, 2u}) {
    const std::string path = "/copy-" + std::to_string(id);
    auto saved = tiers_->CopyTo(SeqId(id), &env_, path, /*sync=*/true,
                                /*llama_token_header=*/false);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->num_tokens, kNumTokens);
    EXPECT_EQ(saved->bytes_written, entry_bytes_);
    auto bytes = ReadFileToString(&env_, path);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, SaveToString(*cache_, SeqId(id)));
    // As a slot file: the token header of the entry's tokens, then the same.
    auto slot_file = tiers_->CopyTo(SeqId(id), &env_, path + ".slot", true,
                                    /*llama_token_header=*/true);
    ASSERT_TRUE(slot_file.ok()) << slot_file.status();
    auto with_header = ReadFileToString(&env_, path + ".slot");
    ASSERT_TRUE(with_header.ok()) << with_header.status();
    const std::string header =
        with_header->substr(0, with_header->size() - bytes->size());
    EXPECT_EQ(slot_file->bytes_written, with_header->size());
    EXPECT_EQ(with_header->substr(header.size()), *bytes);
    EXPECT_EQ(header.size(), 12 + 4 * (kNumTokens + 4));
    EXPECT_EQ(header.substr(0, 4), "qsgg");  // 'ggsq' as a little-endian u32
  }
  EXPECT_TRUE(tiers_->CopyTo(SeqId(3), &env_, "/copy-3", true, true)
                  .status()
                  .IsNotFound());
  EXPECT_FALSE(env_.FileExists("/copy-3"));
}

}  // namespace
}  // namespace kvault
