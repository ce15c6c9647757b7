// KvVault: restores that need eviction spill idle LRU sequences to RAM then
// disk, and every spilled sequence comes back intact; drops happen only when
// every tier is over budget and are reported; failures change nothing else.
#include "kv/kv_vault.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "core/fault_injecting_env.h"
#include "core/log.h"
#include "kv/slot_file.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::SequenceBytes;
using state_test::SmallLayout;

constexpr uint32_t kPageSize = 4;
constexpr uint32_t kNumPages = 16;
constexpr char kSpillDir[] = "/spill";
constexpr SeqId kScratchA{0xFFFFFF00u};
constexpr SeqId kScratchB{0xFFFFFF01u};

// Returns the state-file size of `n` tokens of SmallLayout() in one chunk,
// from the format document: 128 + 8n + 8 + n * cell_bytes + 8 + 24.
uint64_t StateBytes(uint64_t n) {
  return 128 + 8 * n + 8 + n * SmallLayout().cell_bytes() + (n > 0 ? 8 : 0) +
         24;
}

// What a sequence holds: its tokens/positions and K/V bytes, in order.
struct Content {
  std::vector<TokenPos> cells;
  std::string bytes;
  friend bool operator==(const Content&, const Content&) = default;
};

Content ContentOf(const KvCache& cache, SeqId seq) {
  std::span<const TokenPos> cells = cache.table().Cells(seq);
  return Content{{cells.begin(), cells.end()}, SequenceBytes(cache, seq)};
}

std::vector<uint32_t> Ids(const std::vector<Eviction>& evicted) {
  std::vector<uint32_t> out;
  for (const Eviction& e : evicted) out.push_back(e.seq.value());
  return out;
}

class KvVaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = state_test::MakeCache(SmallLayout(), kNumPages, kPageSize);
    source_ = state_test::MakeCache(SmallLayout(), 64, kPageSize);
    ASSERT_TRUE(env_.CreateDir("/saved").ok());
    ASSERT_TRUE(env_.SyncDir("/").ok());
  }

  // Builds the vault; RAM budget 0 or disk budget 0 leave that tier out.
  void MakeVault(uint64_t ram_budget, uint64_t disk_budget) {
    KvVaultOptions o;
    o.env = &env_;
    o.fingerprint = kTestFingerprint;
    o.ram_budget_bytes = ram_budget;
    if (disk_budget > 0) o.disk_dir = kSpillDir;
    o.disk_budget_bytes = disk_budget;
    auto vault = KvVault::Create(cache_.get(), o);
    ASSERT_TRUE(vault.ok()) << vault.status();
    vault_ = std::move(vault).value();
  }

  // Adds sequences `ids` of `num_tokens` random tokens each, touched in the
  // order given, and remembers their contents.
  void AddSequences(std::vector<uint32_t> ids, uint64_t num_tokens) {
    for (uint32_t id : ids) {
      AppendRandom(cache_.get(), SeqId(id), num_tokens, 1000 + id);
      vault_->Touch(SeqId(id));
      original_[id] = ContentOf(*cache_, SeqId(id));
    }
  }

  // Saves a random sequence of `num_tokens` tokens (built in source_) to
  // /saved/<name> and returns its path; remembers its content as `name`.
  // Returns SavedFile(name, num_tokens) with one bit flipped inside chunk
  // 0's payload (after the 128-byte header and the token table).
  std::string CorruptSavedFile(const std::string& name, uint64_t num_tokens) {
    std::string path = SavedFile(name, num_tokens);
    auto bytes = ReadFileToString(&env_, path);
    EXPECT_TRUE(bytes.ok());
    if (!bytes.ok()) return path;
    (*bytes)[128 + 8 * num_tokens + 8 + 100] ^= 0x20;
    EXPECT_TRUE(WriteStringToFile(&env_, *bytes, path, true).ok());
    return path;
  }

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
    const std::string path = "/saved/" + name;
    auto saved =
        SaveSequenceToFile(&env_, *source_, seq, kTestFingerprint, path);
    EXPECT_TRUE(saved.ok()) << saved.status();
    return path;
  }

  // Brings `id` back if spilled and expects its original content.
  void ExpectIntact(uint32_t id) {
    SCOPED_TRACE("seq#" + std::to_string(id));
    auto back = vault_->EnsureResident(SeqId(id));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(ContentOf(*cache_, SeqId(id)) == original_[id]);
    EXPECT_FALSE(vault_->IsSpilled(SeqId(id)));
    EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
  }

  const TierStats& Tier(const VaultStats& s, const std::string& name) {
    for (const TierStats& t : s.tiers) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << "no tier " << name;
    return s.tiers.front();
  }

  FaultInjectingEnv env_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvCache> source_;
  std::unique_ptr<KvVault> vault_;
  std::map<uint32_t, Content> original_;
  std::map<std::string, Content> saved_;
};

TEST(LruEvictionPolicyTest, IdleOnlyLeastRecentlyUsedFirstTiesById) {
  auto policy = MakeLruEvictionPolicy();
  EXPECT_EQ(policy->name(), "lru");
  std::vector<SeqUsage> usages = {{SeqId(5), 3, 4, false},
                                  {SeqId(2), 9, 4, false},
                                  {SeqId(7), 1, 4, true},
                                  {SeqId(1), 3, 4, false},
                                  {SeqId(4), 0, 4, false}};
  EXPECT_EQ(policy->EvictionOrder(usages),
            (std::vector<SeqId>{SeqId(4), SeqId(1), SeqId(5), SeqId(2)}));
}

// The acceptance scenario: a restore that needs eviction spills idle LRU
// sequences to RAM, then (RAM full) demotes to disk; all come back intact.
TEST_F(KvVaultTest, RestoreNeedingEvictionSpillsToRamThenDiskAndAllComeBack) {
  const uint64_t s12 = StateBytes(12);
  MakeVault(/*ram_budget=*/s12 + s12 / 2, /*disk_budget=*/1 << 20);
  AddSequences({1, 2, 3, 4}, 12);  // 12 of 16 pages used, 1 least recent
  const std::string path = SavedFile("big", 40);  // needs 10 pages

  auto restored = vault_->Restore(SeqId(9), path);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->num_tokens, 40u);
  EXPECT_EQ(restored->bytes_read, StateBytes(40));
  EXPECT_GE(restored->elapsed_ms, 0.0);
  ASSERT_EQ(restored->evicted.size(), 2u);
  EXPECT_EQ(restored->evicted[0], (Eviction{SeqId(1), "ram", 12, s12}));
  EXPECT_EQ(restored->evicted[1], (Eviction{SeqId(2), "ram", 12, s12}));
  EXPECT_EQ(vault_->last_evictions(), restored->evicted);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == saved_["big"]);

  // Seq 1 went to RAM, then was demoted to disk to make room for seq 2.
  VaultStats stats = vault_->Stats();
  ASSERT_EQ(stats.tiers.size(), 2u);
  EXPECT_EQ(stats.tiers[0].name, "ram");
  EXPECT_EQ(stats.tiers[0].num_spills, 2u);
  EXPECT_EQ(stats.tiers[0].num_demotions, 1u);
  EXPECT_EQ(stats.tiers[0].num_entries, 1u);
  EXPECT_EQ(stats.tiers[0].used_bytes, s12);
  EXPECT_EQ(stats.tiers[1].num_spills, 1u);
  EXPECT_EQ(stats.tiers[1].num_entries, 1u);
  EXPECT_TRUE(env_.FileExists("/spill/seq-1.kvstate"));
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(stats.restores_ok, 1u);
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(1), SeqId(2)}));
  EXPECT_FALSE(cache_->table().Contains(SeqId(1)));
  EXPECT_TRUE(ContentOf(*cache_, SeqId(3)) == original_[3]);

  // The pool is full now: each bring-back evicts the next LRU idle sequence.
  auto back1 = vault_->EnsureResident(SeqId(1));
  ASSERT_TRUE(back1.ok()) << back1.status();
  ASSERT_TRUE(back1->has_value());
  EXPECT_EQ(Ids((*back1)->evicted), std::vector<uint32_t>{3});
  EXPECT_EQ((*back1)->num_tokens, 12u);
  original_[9] = saved_["big"];
  for (uint32_t id : {1, 2, 3, 4, 9, 1, 3}) ExpectIntact(id);
  stats = vault_->Stats();
  EXPECT_EQ(Tier(stats, "ram").num_drops + Tier(stats, "disk").num_drops, 0u);
  EXPECT_GE(Tier(stats, "ram").num_bring_backs, 1u);
  EXPECT_GE(Tier(stats, "disk").num_bring_backs, 1u);
  EXPECT_EQ(stats.restores_failed, 0u);
  // Already resident: nothing to do.
  auto again = vault_->EnsureResident(SeqId(3));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
}

TEST_F(KvVaultTest, ActiveSequencesAreNeverEvicted) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2, 3, 4}, 12);
  vault_->SetActive(SeqId(1), true);
  vault_->SetActive(SeqId(2), true);
  EXPECT_TRUE(vault_->Evict(SeqId(1)).status().code() ==
              StatusCode::kFailedPrecondition);
  auto restored = vault_->Restore(SeqId(9), SavedFile("a", 40));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(Ids(restored->evicted), (std::vector<uint32_t>{3, 4}));
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == original_[1]);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(2)) == original_[2]);
  // With seq 9 active too, nothing may go: the restore fails, evicting none.
  vault_->SetActive(SeqId(9), true);
  auto refused = vault_->Restore(SeqId(10), SavedFile("b", 4));
  EXPECT_TRUE(refused.status().IsResourceExhausted()) << refused.status();
  EXPECT_TRUE(vault_->last_evictions().empty());
  EXPECT_FALSE(cache_->table().Contains(SeqId(10)));
  // Once idle again it is evictable.
  vault_->SetActive(SeqId(2), false);
  auto ok = vault_->Restore(SeqId(10), SavedFile("c", 4));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(Ids(ok->evicted), std::vector<uint32_t>{2});
}

// Free 7 pages + evictable 3 (seq 3; seq 1's pages are shared with the
// active seq 5, so evicting it frees none) + the target's own 3 < 14
// needed: nothing is evicted.
TEST_F(KvVaultTest, NotEnoughEvenAfterEvictingEverythingEvictsNothing) {
  MakeVault(1 << 20, 1 << 20);
  AddSequences({1, 2, 3}, 12);
  ASSERT_TRUE(cache_->CopySequence(SeqId(1), SeqId(5)).ok());
  vault_->SetActive(SeqId(5), true);
  const std::string path = SavedFile("big", 56);
  const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
  auto restored = vault_->Restore(SeqId(2), path);  // the target is seq 2
  ASSERT_TRUE(restored.status().IsResourceExhausted()) << restored.status();
  EXPECT_NE(restored.status().message().find(
                "restore into seq#2 needs 56 cells (14 pages); free 7 pages, "
                "evictable 3 pages"),
            std::string::npos)
      << restored.status();
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");
  EXPECT_TRUE(vault_->last_evictions().empty());
  EXPECT_TRUE(vault_->SpilledSequences().empty());
  VaultStats stats = vault_->Stats();
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.restores_failed, 1u);
  // Without the sharing 6 pages would be evictable: 7 + 6 + the target's
  // own 3 >= 14 fits (the target is spilled first, then the others).
  vault_->SetActive(SeqId(5), false);
  cache_->RemoveSequence(SeqId(5));
  auto fits = vault_->Restore(SeqId(2), path);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(Ids(fits->evicted), (std::vector<uint32_t>{2, 1, 3}));
  EXPECT_FALSE(vault_->IsSpilled(SeqId(2)));  // its stale copy is gone
  EXPECT_TRUE(ContentOf(*cache_, SeqId(2)) == saved_["big"]);
}

TEST_F(KvVaultTest, DropsOnlyWhenEveryTierIsOverBudgetAndReportsThem) {
  const uint64_t s12 = StateBytes(12);
  MakeVault(s12 + 100, s12 + 100);  // one entry per tier
  AddSequences({1, 2, 3}, 12);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  auto e2 = vault_->Evict(SeqId(2));  // demotes seq 1 to disk
  ASSERT_TRUE(e2.ok()) << e2.status();
  EXPECT_EQ(e2->tier, "ram");
  VaultStats stats = vault_->Stats();
  EXPECT_EQ(Tier(stats, "ram").num_drops + Tier(stats, "disk").num_drops, 0u);
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(1), SeqId(2)}));

  ScopedLogCapture capture(LogLevel::kWarning);
  ASSERT_TRUE(vault_->Evict(SeqId(3)).ok());  // seq 2 -> disk, seq 1 dropped
  stats = vault_->Stats();
  EXPECT_EQ(Tier(stats, "disk").num_drops, 1u);
  EXPECT_EQ(Tier(stats, "disk").dropped_bytes, s12);
  EXPECT_EQ(Tier(stats, "ram").num_drops, 0u);
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("dropped seq#1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(std::to_string(s12) + " bytes"), std::string::npos)
      << lines[0];
  EXPECT_FALSE(vault_->IsSpilled(SeqId(1)));
  EXPECT_TRUE(vault_->EnsureResident(SeqId(1)).status().IsNotFound());
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(2), SeqId(3)}));
  ExpectIntact(2);
  ExpectIntact(3);
}

TEST_F(KvVaultTest, FailedDiskWriteDuringEvictionKeepsSequenceResident) {
  const uint64_t s12 = StateBytes(12);
  MakeVault(s12 + 100, 1 << 20);
  AddSequences({1, 2, 3, 4}, 12);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());    // into RAM
  const std::string path = SavedFile("x", 40);  // 10 pages, 7 free
  env_.FailNthWrite(1, {FaultKind::kNoSpace, true, 10});
  const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
  // Seq 2 needs RAM room: demoting seq 1 to disk fails, so seq 2 stays.
  auto failed = vault_->Evict(SeqId(2));
  EXPECT_TRUE(failed.status().IsResourceExhausted()) << failed.status();
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");
  EXPECT_TRUE(vault_->IsSpilled(SeqId(1)));
  EXPECT_EQ(Tier(vault_->Stats(), "ram").num_entries, 1u);
  auto names = env_.GetChildren(kSpillDir);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty()) << names->front();
  // A restore that needs those evictions fails and changes nothing.
  auto restored = vault_->Restore(SeqId(9), path);
  EXPECT_TRUE(restored.status().IsResourceExhausted()) << restored.status();
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");
  EXPECT_EQ(vault_->Stats().restores_failed, 1u);
  env_.ClearFaults();
  auto retried = vault_->Restore(SeqId(9), path);
  ASSERT_TRUE(retried.ok()) << retried.status();
  for (uint32_t id : {1, 2, 3, 4}) ExpectIntact(id);
}

TEST_F(KvVaultTest, CorruptFileAfterEvictionsLeavesTargetUnchanged) {
  MakeVault(1 << 20, 1 << 20);
  AddSequences({1, 2, 3, 4}, 12);
  AppendRandom(cache_.get(), SeqId(9), 4, 99);  // the target's old contents
  const Content target_before = ContentOf(*cache_, SeqId(9));
  const std::string path = CorruptSavedFile("bad", 40);

  auto restored = vault_->Restore(SeqId(9), path);
  ASSERT_TRUE(restored.status().IsCorruption()) << restored.status();
  EXPECT_EQ(restored.status().reason(), kReasonChecksumMismatch);
  EXPECT_NE(restored.status().message().find("seq#1 -> ram"), std::string::npos)
      << restored.status();
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == target_before);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(4)) == original_[4]);
  EXPECT_EQ(Ids(vault_->last_evictions()), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(1), SeqId(2), SeqId(3)}));
  EXPECT_FALSE(cache_->table().Contains(kRestoreScratchSeq));
  EXPECT_EQ(vault_->Stats().restores_failed, 1u);
  for (uint32_t id : {1, 2, 3}) ExpectIntact(id);
}

TEST_F(KvVaultTest, FailedBringBackKeepsTheTierEntry) {
  MakeVault(0, 1 << 20);
  AddSequences({1, 2, 3, 4}, 12);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  // No room: everything else is active.
  ASSERT_TRUE(vault_->Restore(SeqId(9), SavedFile("fill", 28)).ok());
  for (uint32_t id : {2, 3, 4, 9}) vault_->SetActive(SeqId(id), true);
  auto no_room = vault_->EnsureResident(SeqId(1));
  EXPECT_TRUE(no_room.status().IsResourceExhausted()) << no_room.status();
  EXPECT_TRUE(vault_->IsSpilled(SeqId(1)));
  // A corrupt entry is reported and kept (not silently discarded).
  vault_->SetActive(SeqId(9), false);
  auto bytes = ReadFileToString(&env_, "/spill/seq-1.kvstate");
  ASSERT_TRUE(bytes.ok());
  std::string corrupt = *bytes;
  corrupt[128 + 8 * 12 + 8 + 5] ^= 0x01;
  ASSERT_TRUE(
      WriteStringToFile(&env_, corrupt, "/spill/seq-1.kvstate", true).ok());
  const Content nine = ContentOf(*cache_, SeqId(9));
  auto bad = vault_->EnsureResident(SeqId(1));
  EXPECT_TRUE(bad.status().IsCorruption()) << bad.status();
  EXPECT_NE(
      bad.status().message().find("bringing back seq#1 from the disk tier"),
      std::string::npos)
      << bad.status();
  EXPECT_TRUE(vault_->IsSpilled(SeqId(1)));
  EXPECT_EQ(vault_->Stats().restores_failed, 2u);
  // Seq 9 was evicted to make room for the failed bring-back: still safe.
  EXPECT_EQ(Ids(vault_->last_evictions()), std::vector<uint32_t>{9});
  ASSERT_TRUE(vault_->EnsureResident(SeqId(9)).ok());
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == nine);
  ASSERT_TRUE(
      WriteStringToFile(&env_, *bytes, "/spill/seq-1.kvstate", true).ok());
  vault_->SetActive(SeqId(4), false);
  ExpectIntact(1);
}

// With a contiguous policy free pages are not enough: eviction goes on
// until a run of free pages fits the restore.
TEST_F(KvVaultTest, ContiguousPolicyEvictsUntilARunFits) {
  cache_ = state_test::MakeCache(SmallLayout(), kNumPages, kPageSize,
                                 KvPolicy::kContiguous);
  MakeVault(1 << 20, 0);
  const std::vector<SeqId> fillers =
      state_test::FragmentPool(cache_.get(), 100, 7);
  ASSERT_EQ(cache_->pool().num_free_pages(), 8u);  // single-page holes
  auto restored = vault_->Restore(SeqId(9), SavedFile("two_pages", 8));
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->evicted.size(), 1u);
  EXPECT_EQ(restored->evicted[0].seq, fillers.front());  // LRU tie: lowest id
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == saved_["two_pages"]);
}

TEST_F(KvVaultTest, DiskEntriesSurviveARestart) {
  MakeVault(0, 1 << 20);
  AddSequences({1, 2, 3}, 12);
  ASSERT_TRUE(vault_->Evict(SeqId(2)).ok());
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  vault_.reset();
  env_.SimulateCrash();
  cache_ = state_test::MakeCache(SmallLayout(), kNumPages, kPageSize);
  MakeVault(0, 1 << 20);
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(1), SeqId(2)}));
  EXPECT_EQ(Tier(vault_->Stats(), "disk").used_bytes, 2 * StateBytes(12));
  ExpectIntact(1);
  ExpectIntact(2);
}

TEST_F(KvVaultTest, SaveWorksForResidentAndSpilledSequences) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2}, 7);
  // A named save is a slot file: llama.cpp's token header, then the state.
  const std::string expected =
      EncodeSlotFileHeader(cache_->table().Cells(SeqId(1))) +
      state_test::SaveToString(*cache_, SeqId(1));
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  auto spilled = vault_->Save(SeqId(1), "/saved/one");
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_EQ(spilled->num_tokens, 7u);
  EXPECT_EQ(spilled->bytes_written, expected.size());
  EXPECT_EQ(*ReadFileToString(&env_, "/saved/one"), expected);
  auto resident = vault_->Save(SeqId(2), "/saved/two");
  ASSERT_TRUE(resident.ok()) << resident.status();
  EXPECT_TRUE(vault_->Save(SeqId(8), "/saved/none").status().IsNotFound());
  auto copy = vault_->Restore(SeqId(20), "/saved/one");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE(ContentOf(*cache_, SeqId(20)) == original_[1]);
  EXPECT_TRUE(vault_->IsSpilled(SeqId(1)));  // saving did not bring it back
}

TEST_F(KvVaultTest, RestoreIntoSpilledTargetDiscardsTheStaleCopy) {
  MakeVault(1 << 20, 0);
  AddSequences({1}, 5);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  auto restored = vault_->Restore(SeqId(1), SavedFile("n", 6));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(vault_->IsSpilled(SeqId(1)));
  EXPECT_EQ(Tier(vault_->Stats(), "ram").used_bytes, 0u);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == saved_["n"]);
}

TEST_F(KvVaultTest, SequenceLargerThanEveryTierIsNotEvictable) {
  MakeVault(StateBytes(12), 0);
  AddSequences({1}, 20);
  AddSequences({2}, 12);
  auto evicted = vault_->Evict(SeqId(1));
  EXPECT_TRUE(evicted.status().IsResourceExhausted()) << evicted.status();
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == original_[1]);
  // 16 - 8 = 8 free, only seq 2 (3 pages) evictable: 13 pages do not fit.
  auto restored = vault_->Restore(SeqId(9), SavedFile("big", 52));
  EXPECT_TRUE(restored.status().IsResourceExhausted()) << restored.status();
  EXPECT_NE(restored.status().message().find("free 8 pages, evictable 3 pages"),
            std::string::npos)
      << restored.status();
  EXPECT_TRUE(vault_->SpilledSequences().empty());
}

TEST_F(KvVaultTest, MakeRoomEvictsIdleSequencesInLruOrder) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2, 3, 4, 5}, 12);  // 15 of 16 pages
  vault_->Touch(SeqId(1));            // now seq 2 is least recently used
  ASSERT_TRUE(vault_->MakeRoom(2).ok());
  EXPECT_EQ(Ids(vault_->last_evictions()), std::vector<uint32_t>{2});
  EXPECT_EQ(cache_->pool().num_free_pages(), 4u);
  AppendRandom(cache_.get(), SeqId(5), 8, 7);  // takes the 2 pages
  EXPECT_TRUE(vault_->MakeRoom(0).ok());
  EXPECT_TRUE(vault_->MakeRoom(2).ok());  // already free: evicts nothing
  EXPECT_TRUE(vault_->last_evictions().empty());
  for (uint32_t id : {1, 2, 3, 4}) ExpectIntact(id);
}

// Protected and active sequences are never evicted, whatever their place in
// the LRU order; a request even every candidate cannot meet evicts nothing.
TEST_F(KvVaultTest, MakeRoomHonoursProtectAndActiveAndRefusesWholly) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2, 3, 4, 5}, 12);  // LRU order 1..5; 1 page free
  vault_->SetActive(SeqId(2), true);
  const std::vector<SeqId> protect = {SeqId(1), SeqId(3)};
  ASSERT_TRUE(vault_->MakeRoom(4, protect).ok());
  EXPECT_EQ(Ids(vault_->last_evictions()), std::vector<uint32_t>{4});
  EXPECT_EQ(cache_->pool().num_free_pages(), 4u);

  const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
  const Status refused = vault_->MakeRoom(8, protect);  // 4 free + seq 5's 3
  EXPECT_TRUE(refused.IsResourceExhausted()) << refused;
  EXPECT_EQ(refused.message(),
            "making room for 8 pages; free 4 pages, evictable 3 pages");
  EXPECT_TRUE(vault_->last_evictions().empty());
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");

  ASSERT_TRUE(vault_->MakeRoom(7, protect).ok());
  EXPECT_EQ(Ids(vault_->last_evictions()), std::vector<uint32_t>{5});
  for (uint32_t id : {1, 2, 3}) {
    EXPECT_TRUE(cache_->table().Contains(SeqId(id))) << id;
  }
  vault_->SetActive(SeqId(2), false);
  for (uint32_t id : {4, 5}) ExpectIntact(id);
}

TEST_F(KvVaultTest, EraseDropsFromCacheAndTiers) {
  MakeVault(1 << 20, 1 << 20);
  AddSequences({1, 2}, 4);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  ASSERT_TRUE(vault_->Erase(SeqId(1)).ok());
  ASSERT_TRUE(vault_->Erase(SeqId(2)).ok());
  EXPECT_FALSE(vault_->IsSpilled(SeqId(1)));
  EXPECT_FALSE(cache_->table().Contains(SeqId(2)));
  EXPECT_EQ(Tier(vault_->Stats(), "ram").used_bytes, 0u);
  EXPECT_TRUE(vault_->EnsureResident(SeqId(1)).status().IsNotFound());
}

// --- Asynchronous restore and save ---------------------------------------

// Runs job->Load() on another thread, as the engine's I/O thread would.
Status LoadOnThread(RestoreJob* job) {
  Status status;
  std::thread io([&] { status = job->Load(); });
  io.join();
  return status;
}

// BeginRestore evicts exactly what Restore would (the acceptance scenario),
// the scratch cells are never evicted, saved or erased while the job is in
// flight, and EndRestore books it like Restore.
TEST_F(KvVaultTest, BeginRestoreEvictsIdleSequencesAndEndRestoreBooksIt) {
  const uint64_t s12 = StateBytes(12);
  MakeVault(s12 + s12 / 2, 1 << 20);
  AddSequences({1, 2, 3, 4}, 12);
  const std::string path = SavedFile("big", 40);  // needs 10 pages
  auto job = BeginRestoreAt(SeqId(9), path, kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->num_tokens(), 40u);
  EXPECT_EQ(cache_->table().Length(kScratchA), 40u);
  EXPECT_EQ(vault_->SpilledSequences(),
            (std::vector<SeqId>{SeqId(1), SeqId(2)}));
  EXPECT_EQ(vault_->Stats().restores_ok, 0u);

  // In flight: the scratch sequence is nobody's to evict, save or erase.
  EXPECT_TRUE(vault_->Evict(kScratchA).status().IsNotFound());
  EXPECT_TRUE(vault_->Save(kScratchA, "/saved/s").status().IsNotFound());
  EXPECT_TRUE(vault_->SnapshotForSave(kScratchA).status().IsNotFound());
  EXPECT_EQ(vault_->Erase(kScratchA).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(vault_->MakeRoom(4).ok());  // evicts 3 and 4
  EXPECT_EQ(Ids(vault_->last_evictions()), (std::vector<uint32_t>{3, 4}));
  EXPECT_TRUE(vault_->MakeRoom(7).IsResourceExhausted());
  EXPECT_EQ(cache_->table().Length(kScratchA), 40u);

  const Status loaded = LoadOnThread(job->get());
  auto restored = vault_->EndRestore(std::move(job).value(), loaded);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->num_tokens, 40u);
  EXPECT_EQ(restored->bytes_read, StateBytes(40));
  ASSERT_EQ(restored->evicted.size(), 2u);
  EXPECT_EQ(restored->evicted[0], (Eviction{SeqId(1), "ram", 12, s12}));
  EXPECT_EQ(restored->evicted[1], (Eviction{SeqId(2), "ram", 12, s12}));
  EXPECT_EQ(vault_->last_evictions(), restored->evicted);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == saved_["big"]);
  EXPECT_FALSE(cache_->table().Contains(kScratchA));
  VaultStats stats = vault_->Stats();
  EXPECT_EQ(stats.restores_ok, 1u);
  EXPECT_EQ(stats.restores_failed, 0u);
  EXPECT_EQ(stats.evictions, 4u);
  original_[9] = saved_["big"];
  for (uint32_t id : {1, 2, 3, 4, 9}) ExpectIntact(id);
}

// Two jobs in flight: the second one's eviction never takes the first one's
// scratch cells (its target's old cells may go: they are replaced anyway,
// and the commit discards the stale spilled copy).
TEST_F(KvVaultTest, TwoRestoresInFlightUnderDifferentScratchIds) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2}, 12);
  auto job_a = BeginRestoreAt(SeqId(1), SavedFile("a", 20), kScratchA);
  ASSERT_TRUE(job_a.ok()) << job_a.status();  // 6 + 5 of 16 pages
  EXPECT_TRUE(vault_->last_evictions().empty());
  auto job_b = BeginRestoreAt(SeqId(5), SavedFile("b", 24), kScratchB);
  ASSERT_TRUE(job_b.ok()) << job_b.status();  // 6 pages: evicts seq 1
  EXPECT_EQ(Ids(vault_->last_evictions()), std::vector<uint32_t>{1});
  EXPECT_EQ(cache_->table().Length(kScratchA), 20u);
  auto job_c = BeginRestoreAt(SeqId(6), SavedFile("c", 4), kScratchB);
  EXPECT_EQ(job_c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(vault_->Stats().restores_failed, 1u);
  const Status loaded_b = LoadOnThread(job_b->get());
  const Status loaded_a = LoadOnThread(job_a->get());
  auto b = vault_->EndRestore(std::move(job_b).value(), loaded_b);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Ids(b->evicted), std::vector<uint32_t>{1});
  EXPECT_TRUE(vault_->IsSpilled(SeqId(1)));
  auto a = vault_->EndRestore(std::move(job_a).value(), loaded_a);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->evicted.empty());
  EXPECT_FALSE(vault_->IsSpilled(SeqId(1)));
  EXPECT_EQ(Tier(vault_->Stats(), "ram").used_bytes, 0u);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == saved_["a"]);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(5)) == saved_["b"]);
  EXPECT_EQ(vault_->Stats().restores_ok, 2u);
  ExpectIntact(2);
}

TEST_F(KvVaultTest, BeginRestoreWithoutRoomFailsLikeRestoreEvictingNothing) {
  MakeVault(1 << 20, 1 << 20);
  AddSequences({1, 2, 3}, 12);
  ASSERT_TRUE(cache_->CopySequence(SeqId(1), SeqId(5)).ok());
  vault_->SetActive(SeqId(5), true);
  const std::string path = SavedFile("big", 56);
  const state_test::CacheSnapshot before = state_test::TakeSnapshot(*cache_);
  auto job = BeginRestoreAt(SeqId(2), path, kScratchA);
  ASSERT_TRUE(job.status().IsResourceExhausted()) << job.status();
  EXPECT_NE(job.status().message().find(
                "restore into seq#2 needs 56 cells (14 pages); free 7 pages, "
                "evictable 3 pages"),
            std::string::npos)
      << job.status();
  EXPECT_EQ(job.status().message().substr(0, path.size()), path);
  EXPECT_EQ(
      state_test::DiffSnapshots(before, state_test::TakeSnapshot(*cache_)), "");
  EXPECT_TRUE(vault_->last_evictions().empty());
  EXPECT_EQ(vault_->Stats().restores_failed, 1u);
  EXPECT_TRUE(
      BeginRestoreAt(SeqId(2), "/saved/none", kScratchA).status().IsNotFound());
  EXPECT_EQ(BeginRestoreAt(kScratchB, path, kScratchA).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(KvVaultTest, CorruptChunkFailsLoadAndEndRestoreKeepsTheTarget) {
  MakeVault(1 << 20, 1 << 20);
  AddSequences({1, 2, 3, 4}, 12);
  AppendRandom(cache_.get(), SeqId(9), 4, 99);  // the target's old contents
  const Content target_before = ContentOf(*cache_, SeqId(9));
  const std::string path = CorruptSavedFile("bad", 40);

  auto job = BeginRestoreAt(SeqId(9), path, kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  const Status loaded = LoadOnThread(job->get());
  EXPECT_EQ(loaded.reason(), kReasonChecksumMismatch) << loaded;
  auto restored = vault_->EndRestore(std::move(job).value(), loaded);
  ASSERT_TRUE(restored.status().IsCorruption()) << restored.status();
  EXPECT_EQ(restored.status().reason(), kReasonChecksumMismatch);
  EXPECT_NE(restored.status().message().find(path), std::string::npos)
      << restored.status();
  EXPECT_NE(restored.status().message().find("seq#1 -> ram"), std::string::npos)
      << restored.status();
  EXPECT_TRUE(ContentOf(*cache_, SeqId(9)) == target_before);
  EXPECT_FALSE(cache_->table().Contains(kScratchA));
  EXPECT_EQ(Ids(vault_->last_evictions()), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(vault_->Stats().restores_failed, 1u);
  EXPECT_EQ(vault_->Stats().restores_ok, 0u);
  for (uint32_t id : {1, 2, 3}) ExpectIntact(id);
}

TEST_F(KvVaultTest, EndRestoreIntoSpilledTargetDiscardsTheStaleCopy) {
  MakeVault(1 << 20, 0);
  AddSequences({1}, 5);
  ASSERT_TRUE(vault_->Evict(SeqId(1)).ok());
  auto job = BeginRestoreAt(SeqId(1), SavedFile("n", 6), kScratchA);
  ASSERT_TRUE(job.ok()) << job.status();
  const Status loaded = LoadOnThread(job->get());
  ASSERT_TRUE(vault_->EndRestore(std::move(job).value(), loaded).ok());
  EXPECT_FALSE(vault_->IsSpilled(SeqId(1)));
  EXPECT_EQ(Tier(vault_->Stats(), "ram").used_bytes, 0u);
  EXPECT_TRUE(ContentOf(*cache_, SeqId(1)) == saved_["n"]);
}

TEST_F(KvVaultTest, SnapshotForSaveWritesWhatSaveWrites) {
  MakeVault(1 << 20, 0);
  AddSequences({1, 2}, 7);
  ASSERT_TRUE(vault_->Save(SeqId(1), "/saved/sync").ok());
  auto snap = vault_->SnapshotForSave(SeqId(1));
  ASSERT_TRUE(snap.ok()) << snap.status();
  StatusOr<SaveResult> written = InternalError("not run");
  std::thread io([&] {
    written =
        WriteSnapshotToFile(vault_->env(), *vault_->cache().storage(), *snap,
                            "/saved/async", vault_->save_options());
  });
  io.join();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->num_tokens, 7u);
  EXPECT_EQ(*ReadFileToString(&env_, "/saved/async"),
            *ReadFileToString(&env_, "/saved/sync"));
  EXPECT_EQ(vault_->fingerprint(), kTestFingerprint);
  ASSERT_TRUE(vault_->Evict(SeqId(2)).ok());
  EXPECT_TRUE(vault_->SnapshotForSave(SeqId(2)).status().IsNotFound());
  EXPECT_TRUE(vault_->SnapshotForSave(SeqId(8)).status().IsNotFound());
}

TEST_F(KvVaultTest, CreateRejectsBadOptions) {
  KvVaultOptions o;
  o.env = &env_;
  o.disk_dir = kSpillDir;  // but no budget
  EXPECT_EQ(KvVault::Create(cache_.get(), o).status().code(),
            StatusCode::kInvalidArgument);
  KvCacheOptions bookkeeping;
  bookkeeping.num_pages = 4;
  auto no_data = KvCache::Create(bookkeeping);
  ASSERT_TRUE(no_data.ok());
  EXPECT_EQ(KvVault::Create(no_data->get(), KvVaultOptions{}).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kvault
