#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvault {
namespace {

std::vector<TokenPos> Tokens(int first, int count) {
  std::vector<TokenPos> out;
  for (int i = 0; i < count; ++i) out.push_back({first + i, i});
  return out;
}

std::unique_ptr<KvCache> MakeCache(KvPolicy policy) {
  KvCacheOptions o;
  o.num_pages = 16;
  o.page_size = 1;
  o.policy = policy;
  o.layout = KvLayout{2, 1, 4, 4, KvDtype::kF32};
  auto cache = KvCache::Create(o);
  KV_CHECK(cache.ok()) << cache.status();
  return std::move(cache).value();
}

// Fills the pool with 4-cell sequences 0..3, then frees 0 and 2: 8 cells free
// in two runs of 4. Each cell's K row holds its token id.
void Fragment(KvCache* cache) {
  for (int s = 0; s < 4; ++s) {
    auto cells = cache->Append(SeqId(s), Tokens(s * 100, 4));
    ASSERT_TRUE(cells.ok()) << cells.status();
    for (int i = 0; i < 4; ++i) {
      std::vector<float> row(4, float(s * 100 + i));
      for (uint32_t layer = 0; layer < 2; ++layer) {
        cache->storage()->Write(KvSide::kK, layer, (*cells)[i], row);
      }
    }
  }
  cache->RemoveSequence(SeqId(0));
  cache->RemoveSequence(SeqId(2));
}

TEST(KvCacheTest, ContiguousFailsOnFragmentedSpaceWherePagedSucceeds) {
  auto contiguous = MakeCache(KvPolicy::kContiguous);
  Fragment(contiguous.get());
  auto failed = contiguous->Append(SeqId(9), Tokens(900, 6));
  EXPECT_TRUE(failed.status().IsResourceExhausted()) << failed.status();
  auto paged = MakeCache(KvPolicy::kPaged);
  Fragment(paged.get());
  EXPECT_TRUE(paged->Append(SeqId(9), Tokens(900, 6)).ok());
}

TEST(KvCacheTest, DefragOnFailKeepsEverySequencesData) {
  auto cache = MakeCache(KvPolicy::kContiguousDefrag);
  Fragment(cache.get());
  ASSERT_TRUE(cache->Append(SeqId(9), Tokens(900, 6)).ok());
  EXPECT_EQ(cache->counters().defrag_runs, 1u);
  EXPECT_GT(cache->counters().cells_moved, 0u);
  for (int s : {1, 3}) {
    for (uint64_t i = 0; i < 4; ++i) {
      std::vector<float> row(4);
      cache->storage()->Read(KvSide::kK, 1, cache->table().CellAt(SeqId(s), i),
                             row);
      EXPECT_EQ(row[0], float(s * 100 + i)) << "seq " << s << " cell " << i;
    }
  }
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
}

TEST(KvCacheTest, DefragLeavesOneFreeRun) {
  auto cache = MakeCache(KvPolicy::kPaged);
  Fragment(cache.get());
  EXPECT_EQ(cache->Stats().num_free_runs, 2u);
  DefragReport report = cache->Defrag();
  EXPECT_GE(report.cells_moved, report.lower_bound_cells);
  PoolStats stats = cache->Stats();
  EXPECT_EQ(stats.num_free_runs, 1u);
  EXPECT_EQ(stats.largest_free_run_cells, 8u);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.0);
}

TEST(KvPolicyTest, ParsesEveryNameItPrints) {
  for (KvPolicy policy :
       {KvPolicy::kPaged, KvPolicy::kContiguous, KvPolicy::kContiguousDefrag}) {
    StatusOr<KvPolicy> parsed = ParseKvPolicy(KvPolicyName(policy));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, policy);
  }
  EXPECT_EQ(KvPolicyName(KvPolicy::kContiguousDefrag), "contiguous+defrag");
}

TEST(KvPolicyTest, UnknownPolicyNamesTheExpectedValues) {
  // contiguous+shrink is a benchmark configuration, not a cache policy.
  for (const char* text : {"buddy", "", "Paged", "contiguous+shrink"}) {
    StatusOr<KvPolicy> parsed = ParseKvPolicy(text);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(parsed.status().message(),
              "kv_policy \"" + std::string(text) +
                  "\" (expected paged, contiguous or contiguous+defrag)");
  }
}

// Only contiguous+defrag's Append may move cells (it defragments when a
// placement fails); the other policies never touch placed cells.
TEST(KvCacheTest, OnlyContiguousDefragMayMoveCellsOnAppend) {
  EXPECT_FALSE(MakeCache(KvPolicy::kPaged)->MayMoveCellsOnAppend());
  EXPECT_FALSE(MakeCache(KvPolicy::kContiguous)->MayMoveCellsOnAppend());
  auto defrag = MakeCache(KvPolicy::kContiguousDefrag);
  EXPECT_TRUE(defrag->MayMoveCellsOnAppend());
  EXPECT_EQ(defrag->kv_policy(), KvPolicy::kContiguousDefrag);
  Fragment(defrag.get());
  auto cells_of_1_and_3 = [&] {
    std::vector<CellId> cells;
    for (int s : {1, 3}) {
      for (uint64_t i = 0; i < 4; ++i) {
        cells.push_back(defrag->table().CellAt(SeqId(s), i));
      }
    }
    return cells;
  };
  const std::vector<CellId> before = cells_of_1_and_3();
  ASSERT_TRUE(defrag->Append(SeqId(9), Tokens(900, 6)).ok());
  EXPECT_NE(cells_of_1_and_3(), before);
}

}  // namespace
}  // namespace kvault
