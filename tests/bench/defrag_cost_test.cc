#include "bench/scenarios/defrag_cost.h"

#include <cstring>

#include <gtest/gtest.h>

namespace kvault::bench {
namespace {

// A small layout keeps the test fast: 2 layers x 1 head x 32, f16 = 256
// bytes per cell; 2-page sequences of 16-cell pages = 8 KiB each.
FragmentedPoolSpec SmallSpec(double target) {
  FragmentedPoolSpec spec;
  spec.layout = KvLayout{2, 1, 32, 32, KvDtype::kF16};
  spec.page_size = 16;
  spec.seq_pages = 2;
  spec.pool_bytes = 400 * 8192;  // 400 sequences
  spec.free_fraction = 0.25;
  spec.target_fragmentation = target;
  return spec;
}

class DefragCostTest : public ::testing::TestWithParam<double> {};

TEST_P(DefragCostTest, ReachesTargetAndDefragKeepsBytes) {
  const double target = GetParam();
  SCOPED_TRACE(testing::Message() << "target fragmentation " << target);
  auto pool = BuildFragmentedPool(SmallSpec(target));
  ASSERT_TRUE(pool.ok()) << pool.status();
  KvCache& cache = *pool->cache;
  EXPECT_EQ(pool->num_sequences, 400u);
  EXPECT_EQ(pool->num_removed, 100u);
  const PoolStats before = cache.Stats();
  EXPECT_NEAR(before.fragmentation, target, 0.02);
  EXPECT_EQ(before.free_cells, 100u * 32);
  EXPECT_EQ(cache.table().SequenceIds().size(), 300u);
  ASSERT_TRUE(VerifyPatterns(cache).ok());

  const DefragReport report = cache.Defrag();
  EXPECT_GT(report.cells_moved, 0u);
  const PoolStats after = cache.Stats();
  EXPECT_EQ(after.fragmentation, 0.0);
  EXPECT_EQ(after.num_free_runs, 1u);
  EXPECT_EQ(after.used_cells, before.used_cells);
  Status verified = VerifyPatterns(cache);
  EXPECT_TRUE(verified.ok()) << verified;
}

INSTANTIATE_TEST_SUITE_P(Targets, DefragCostTest,
                         ::testing::Values(0.1, 0.3, 0.5, 0.7, 0.9));

TEST(DefragCostVerifyTest, DetectsAChangedByte) {
  auto pool = BuildFragmentedPool(SmallSpec(0.5));
  ASSERT_TRUE(pool.ok()) << pool.status();
  KvCache& cache = *pool->cache;
  const SeqId seq = cache.table().SequenceIds().back();
  const CellId cell = cache.table().CellAt(seq, 5);
  std::span<std::byte> v = cache.storage()->Rows(KvSide::kV, 1, cell);
  v[3] = static_cast<std::byte>(static_cast<uint8_t>(v[3]) ^ 0x40);
  Status s = VerifyPatterns(cache);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("index 5 layer 1"), std::string::npos) << s;
}

TEST(DefragCostVerifyTest, RejectsHolesThatCannotBeApart) {
  FragmentedPoolSpec spec = SmallSpec(0.9);
  spec.free_fraction = 0.8;  // 288 holes among 366 candidates
  auto pool = BuildFragmentedPool(spec);
  EXPECT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
}

TEST(DefragCostRunTest, ReportsMovedBytesAndVerifies) {
  DefragCostOptions options;
  options.spec = SmallSpec(0.5);
  auto r = RunDefragCost(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->verified);
  EXPECT_EQ(r->pool_bytes, 400u * 8192);
  EXPECT_EQ(r->bytes_moved, r->cells_moved * 256);
  EXPECT_GT(r->bytes_moved, 0u);
  EXPECT_EQ(r->fragmentation_after, 0.0);
  EXPECT_NEAR(r->free_fraction, 0.25, 1e-9);
  EXPECT_NE(DefragCostJson(*r).find("\"verified\":true"), std::string::npos);
}

}  // namespace
}  // namespace kvault::bench
