// PrefixStore: publishing a sequence's pages (and tail) as records and bringing
// them back into another sequence, with every kind of bad record refused
// (and removed) instead of used.
#include "kv/prefix_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/memory_file.h"
#include "core/fault_injecting_env.h"
#include "kv/disk_page_store.h"
#include "kv/mem_page_store.h"
#include "state_test_util.h"

namespace kvault {
namespace {

using state_test::AppendRandom;
using state_test::kTestFingerprint;
using state_test::MakeCache;
using state_test::SmallLayout;

constexpr SeqId kA(1);
constexpr SeqId kB(2);

class PrefixStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = MakeCache(SmallLayout(), /*num_pages=*/16, /*page_size=*/4);
    AppendRandom(cache_.get(), kA, 10, /*seed=*/3);  // 2 full pages
    auto mem = std::make_unique<MemPageStore>();
    mem_ = mem.get();
    root_ = ChainRoot(kTestFingerprint, SmallLayout(), 4, 0);
    store_ = std::make_unique<PrefixStore>(
        SingleTier(std::move(mem)), kTestFingerprint, root_, SaveOptions{});
    const auto cells = cache_->table().Cells(kA);
    wanted_.assign(cells.begin(), cells.end());
  }
  // True when kB's first n cells hold kA's K/V bytes.
  bool SameBytes(uint64_t n) {
    const KvStorage& s = *cache_->storage();
    for (uint64_t i = 0; i < n; ++i) {
      const CellId a = cache_->table().CellAt(kA, i);
      const CellId b = cache_->table().CellAt(kB, i);
      for (uint32_t layer = 0; layer < 2; ++layer) {
        if (std::memcmp(s.Rows(KvSide::kK, layer, a).data(),
                        s.Rows(KvSide::kK, layer, b).data(),
                        s.Rows(KvSide::kK, layer, a).size()) != 0 ||
            std::memcmp(s.Rows(KvSide::kV, layer, a).data(),
                        s.Rows(KvSide::kV, layer, b).data(),
                        s.Rows(KvSide::kV, layer, a).size()) != 0) {
          return false;
        }
      }
    }
    return true;
  }

  std::unique_ptr<KvCache> cache_;
  MemPageStore* mem_ = nullptr;
  PageKey root_;
  std::unique_ptr<PrefixStore> store_;
  std::vector<TokenPos> wanted_;
};

TEST_F(PrefixStoreTest, PublishedPagesComeBackIntoAnotherSequence) {
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());
  EXPECT_EQ(mem_->records.size(), 3u);  // 2 pages, then the tail's 2 cells
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());  // nothing new
  EXPECT_EQ(store_->Stats().tiers[0].pages_published, 3u);
  EXPECT_TRUE(store_->HasPageAt(wanted_, 4, 4));
  EXPECT_FALSE(store_->HasPageAt(wanted_, 8, 4));
  EXPECT_TRUE(store_->HasTailAt(wanted_, 8, 4));
  EXPECT_FALSE(store_->HasTailAt(wanted_, 4, 4));

  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 10), 10u);
  EXPECT_EQ(cache_->table().Length(kB), 10u);
  EXPECT_TRUE(std::ranges::equal(wanted_, cache_->table().Cells(kB)));
  EXPECT_TRUE(SameBytes(10));
  EXPECT_FALSE(cache_->table().Contains(kPrefixLoadSeq));
  EXPECT_EQ(store_->Stats().tiers[0].pages_loaded, 3u);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
  EXPECT_EQ(store_->HeldCells(wanted_, 4), std::vector<uint64_t>{8});
  std::vector<TokenPos> other = wanted_;
  other[6].token += 1;
  EXPECT_EQ(store_->HeldCells(other, 4), std::vector<uint64_t>{4});
}

TEST_F(PrefixStoreTest, ExtendStopsAtTheLimitTheFirstGapAndOtherTokens) {
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 7), 4u);  // limit
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 4, 10), 10u);  // on
  cache_->RemoveSequence(kB);
  std::vector<TokenPos> other = wanted_;
  other[5].token += 1;  // page 1 differs: only page 0 is the same chain
  EXPECT_EQ(store_->Extend(cache_.get(), kB, other, 0, 10), 4u);
  cache_->RemoveSequence(kB);
  other = wanted_;
  other[0].token += 1;  // page 0 differs: so does every later key
  EXPECT_EQ(store_->Extend(cache_.get(), kB, other, 0, 10), 0u);
  EXPECT_FALSE(cache_->table().Contains(kB));
  // A sequence that does not hold exactly `have` cells is left alone.
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 4, 10), 4u);
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 0u);
}

// A damaged record, a record under the wrong key, another model's record:
// each is refused, removed and counted, and the sequence keeps what it had.
TEST_F(PrefixStoreTest, BadRecordsAreRefusedRemovedAndCounted) {
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());
  const std::vector<PageKey> keys = PageKeyChain(root_, wanted_, 4);
  mem_->records[keys[1]][mem_->records[keys[1]].size() / 2] ^= 0x01;
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_FALSE(mem_->Contains(keys[1]));
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 1u);
  EXPECT_TRUE(SameBytes(4));

  // Page 0's (valid) record filed under page 1's key.
  cache_->RemoveSequence(kB);
  mem_->records[keys[1]] = mem_->records.at(keys[0]);
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_FALSE(mem_->Contains(keys[1]));
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 2u);

  // Another model's records under this chain's keys (same tokens, same
  // root given, different fingerprint inside the state files).
  auto other_cache = MakeCache(SmallLayout(), 16, 4);
  AppendRandom(other_cache.get(), kA, 10, 3);
  auto foreign_mem = std::make_unique<MemPageStore>();
  MemPageStore* foreign_records = foreign_mem.get();
  PrefixStore writer(SingleTier(std::move(foreign_mem)), ModelFingerprint{9, 9},
                     root_, SaveOptions{});
  ASSERT_TRUE(writer.Publish(*other_cache, kA).ok());
  cache_->RemoveSequence(kB);
  mem_->records = foreign_records->records;
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 10), 0u);
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 3u);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// Regression (issue 40): page checksums are unkeyed, so anyone who could
// write to a shared store could forge a record this server loads. With a
// store key, a record must carry the key's tag: one sealed under another
// key (a complete, valid record of this very page: checksums, model and
// tokens all right) or not sealed at all is refused, removed and counted;
// one sealed under the key loads.
TEST_F(PrefixStoreTest, ForgedRecordsNeedTheStoreKey) {
  auto key = [](const char* k) {
    return std::make_shared<const RecordMac>(*RecordMac::FromKey(k, "test"));
  };
  const std::shared_ptr<const RecordMac> ours = key("0123456789abcdef-ours");
  auto reader_mem = std::make_unique<MemPageStore>();
  MemPageStore* shared = reader_mem.get();
  PrefixStore reader(SingleTier(std::move(reader_mem)), kTestFingerprint,
                     root_, SaveOptions{}, ours);
  const struct {
    const char* what;
    std::shared_ptr<const RecordMac> mac;
    uint64_t loaded;
  } writers[] = {{"another key", key("0123456789abcdef-forger"), 0},
                 {"no key", nullptr, 0},
                 {"the store key", ours, 10}};
  uint64_t refused = 0;
  for (const auto& w : writers) {
    auto mem = std::make_unique<MemPageStore>();
    MemPageStore* written = mem.get();
    PrefixStore writer(SingleTier(std::move(mem)), kTestFingerprint, root_,
                       SaveOptions{}, w.mac);
    ASSERT_TRUE(writer.Publish(*cache_, kA).ok()) << w.what;
    shared->records = written->records;
    cache_->RemoveSequence(kB);
    EXPECT_EQ(reader.Extend(cache_.get(), kB, wanted_, 0, 10), w.loaded)
        << w.what;
    refused += w.loaded == 0 ? 1 : 0;
    EXPECT_EQ(reader.Stats().tiers[0].bad_records, refused) << w.what;
  }
  EXPECT_TRUE(SameBytes(10));
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

// Two models (or cache shapes) sharing one store directory: each has its
// own chain roots, so neither ever finds, let alone reads, the other's
// pages for the same tokens.
TEST_F(PrefixStoreTest, TwoModelsSharingADirectoryNeverSeeEachOthersPages) {
  FaultInjectingEnv env;
  auto open = [&env](const ModelFingerprint& model, const KvLayout& layout) {
    auto disk = DiskPageStore::Open(&env, "/prefix", 1 << 20, false);
    EXPECT_TRUE(disk.ok()) << disk.status();
    return std::make_unique<PrefixStore>(SingleTier(std::move(disk).value()),
                                         model, ChainRoot(model, layout, 4, 0),
                                         SaveOptions{});
  };
  ASSERT_TRUE(open(kTestFingerprint, SmallLayout())->Publish(*cache_, kA).ok());
  const ModelFingerprint other_model{5, 6};
  for (auto& other : {open(other_model, SmallLayout()),
                      open(kTestFingerprint, SmallLayout(KvDtype::kF32))}) {
    EXPECT_EQ(other->Extend(cache_.get(), kB, wanted_, 0, 10), 0u);
    EXPECT_EQ(other->Stats().tiers[0].bad_records, 0u);
    EXPECT_EQ(other->Stats().tiers[0].store.hits +
                  other->Stats().tiers[0].store.misses,
              0u);
    EXPECT_EQ(other->Stats().tiers[0].store.num_records,
              3u);  // the same directory
  }
  EXPECT_EQ(open(kTestFingerprint, SmallLayout())
                ->Extend(cache_.get(), kB, wanted_, 0, 10),
            10u);
}

// The tail after page 1 holds cells 8 and 9: a prompt that continues with
// cell 8 but not 9 takes 1 cell of it; one that differs at cell 8 takes
// none, and the record stays (it is another conversation's, not bad).
TEST_F(PrefixStoreTest, ATailServesAsMuchAsMatchesThePrompt) {
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());
  std::vector<TokenPos> longer = wanted_;
  longer[9].token += 1;
  longer.push_back({7, 10});
  longer.push_back({8, 11});
  EXPECT_EQ(store_->Extend(cache_.get(), kB, longer, 0, 12), 9u);
  EXPECT_TRUE(SameBytes(9));
  EXPECT_TRUE(std::ranges::equal(std::span(longer).first(9),
                                 cache_->table().Cells(kB)));
  cache_->RemoveSequence(kB);
  longer[8].token += 1;
  EXPECT_EQ(store_->Extend(cache_.get(), kB, longer, 0, 12), 8u);
  EXPECT_FALSE(cache_->table().Contains(kPrefixLoadSeq));
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 0u);
  EXPECT_EQ(mem_->records.size(), 3u);
  // The limit caps the tail too.
  cache_->RemoveSequence(kB);
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 9), 9u);
  EXPECT_TRUE(CheckInvariants(cache_->table()).ok());
}

TEST_F(PrefixStoreTest, NoRoomStopsWithoutDroppingTheRecord) {
  ASSERT_TRUE(store_->Publish(*cache_, kA).ok());
  for (uint32_t id = 10; cache_->pool().num_free_pages() > 1; ++id) {
    AppendRandom(cache_.get(), SeqId(id), 4, id);
  }
  EXPECT_EQ(store_->Extend(cache_.get(), kB, wanted_, 0, 10), 4u);
  EXPECT_EQ(mem_->records.size(), 3u);
  EXPECT_EQ(store_->Stats().tiers[0].bad_records, 0u);
}

}  // namespace
}  // namespace kvault
