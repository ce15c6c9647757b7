#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvault {
namespace {

std::vector<TokenPos> Tokens(int first, int count) {
  std::vector<TokenPos> out;
  for (int i = 0; i < count; ++i) out.push_back({first + i, i});
  return out;
}

std::unique_ptr<KvCache> MakeCache(const std::string& policy) {
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
        cache->storage()->WriteK(layer, (*cells)[i], row);
      }
    }
  }
  cache->RemoveSequence(SeqId(0));
  cache->RemoveSequence(SeqId(2));
}

TEST(KvCacheTest, ContiguousFailsOnFragmentedSpaceWherePagedSucceeds) {
  auto contiguous = MakeCache("contiguous");
  Fragment(contiguous.get());
  auto failed = contiguous->Append(SeqId(9), Tokens(900, 6));
  EXPECT_TRUE(failed.status().IsResourceExhausted()) << failed.status();
  auto paged = MakeCache("paged");
  Fragment(paged.get());
  EXPECT_TRUE(paged->Append(SeqId(9), Tokens(900, 6)).ok());
}

TEST(KvCacheTest, DefragOnFailKeepsEverySequencesData) {
  auto cache = MakeCache("contiguous+defrag");
  Fragment(cache.get());
  ASSERT_TRUE(cache->Append(SeqId(9), Tokens(900, 6)).ok());
  EXPECT_EQ(cache->counters().defrag_runs, 1u);
  EXPECT_GT(cache->counters().cells_moved, 0u);
  for (int s : {1, 3}) {
    for (uint64_t i = 0; i < 4; ++i) {
      std::vector<float> row(4);
      cache->storage()->ReadK(1, cache->table().CellAt(SeqId(s), i), row);
      EXPECT_EQ(row[0], float(s * 100 + i)) << "seq " << s << " cell " << i;
    }
  }
  EXPECT_TRUE(cache->table().CheckInvariants().ok());
}

TEST(KvCacheTest, DefragLeavesOneFreeRun) {
  auto cache = MakeCache("paged");
  Fragment(cache.get());
  EXPECT_EQ(cache->Stats().num_free_runs, 2u);
  DefragReport report = cache->Defrag();
  EXPECT_GE(report.cells_moved, report.lower_bound_cells);
  PoolStats stats = cache->Stats();
  EXPECT_EQ(stats.num_free_runs, 1u);
  EXPECT_EQ(stats.largest_free_run_cells, 8u);
  EXPECT_DOUBLE_EQ(stats.fragmentation, 0.0);
}

TEST(KvCacheTest, UnknownPolicyIsRejected) {
  KvCacheOptions o;
  o.num_pages = 4;
  o.policy = "buddy";
  EXPECT_EQ(KvCache::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvault
