#include "kv/page_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

PagePool MakePool(uint32_t num_pages, uint32_t page_size) {
  StatusOr<PagePool> pool = PagePool::Create(num_pages, page_size);
  KV_CHECK(pool.ok()) << pool.status();
  return std::move(pool).value();
}

std::vector<PageId> Ids(std::initializer_list<uint32_t> values) {
  std::vector<PageId> ids;
  for (uint32_t v : values) ids.push_back(PageId(v));
  return ids;
}

TEST(PagePoolTest, CreateAcceptsPowersOfTwoUpTo256) {
  for (uint32_t size = 1; size <= 256; size *= 2) {
    StatusOr<PagePool> pool = PagePool::Create(3, size);
    ASSERT_TRUE(pool.ok()) << size;
    EXPECT_EQ(pool->page_size(), size);
    EXPECT_EQ(pool->num_pages(), 3u);
    EXPECT_EQ(pool->num_free_pages(), 3u);
    EXPECT_EQ(pool->num_cells(), 3u * size);
  }
}

TEST(PagePoolTest, CreateRejectsBadPageSize) {
  for (uint32_t size : {0u, 3u, 6u, 100u, 512u}) {
    StatusOr<PagePool> pool = PagePool::Create(4, size);
    ASSERT_FALSE(pool.ok()) << size;
    EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(pool.status().message(), HasSubstr("power of two"));
    EXPECT_THAT(pool.status().message(), HasSubstr(std::to_string(size)));
  }
}

TEST(PagePoolTest, CreateRejectsZeroPages) {
  StatusOr<PagePool> pool = PagePool::Create(0, 16);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.status().message(), HasSubstr("num_pages"));
}

TEST(PagePoolTest, FirstCellIsPageTimesPageSize) {
  PagePool pool = MakePool(8, 16);
  EXPECT_EQ(pool.FirstCell(PageId(0)), CellId(0));
  EXPECT_EQ(pool.FirstCell(PageId(5)), CellId(80));
  EXPECT_DEATH(pool.FirstCell(PageId(8)), "invalid page id");
}

TEST(PagePoolTest, FreshPoolAllocatesLowestPagesFirst) {
  PagePool pool = MakePool(5, 4);
  EXPECT_EQ(pool.PeekFreePages(2), Ids({0, 1}));
  EXPECT_EQ(pool.Allocate(2), Ids({0, 1}));
  EXPECT_EQ(pool.num_free_pages(), 3u);
  EXPECT_FALSE(pool.IsFree(PageId(0)));
  EXPECT_EQ(pool.RefCount(PageId(1)), 1u);
  EXPECT_TRUE(pool.IsFree(PageId(2)));
  EXPECT_EQ(pool.RefCount(PageId(2)), 0u);
}

TEST(PagePoolTest, AllocateReturnsDistinctFreePagesAndPeekMatches) {
  PagePool pool = MakePool(10, 1);
  pool.AllocateSpecific(Ids({3, 7}));
  std::vector<PageId> peeked = pool.PeekFreePages(8);
  std::vector<PageId> got = pool.Allocate(8);
  EXPECT_EQ(got, peeked);
  std::set<PageId> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), 8u);
  EXPECT_EQ(unique.count(PageId(3)), 0u);
  EXPECT_EQ(unique.count(PageId(7)), 0u);
  EXPECT_EQ(pool.num_free_pages(), 0u);
  EXPECT_FALSE(pool.CanAllocate(1));
  EXPECT_TRUE(pool.CanAllocate(0));
}

TEST(PagePoolTest, AllocateZeroPagesIsEmpty) {
  PagePool pool = MakePool(2, 1);
  EXPECT_TRUE(pool.Allocate(0).empty());
  EXPECT_EQ(pool.num_free_pages(), 2u);
}

TEST(PagePoolTest, AllocateBeyondFreeDies) {
  PagePool pool = MakePool(3, 1);
  EXPECT_DEATH(pool.Allocate(4), "Allocate\\(4\\) with 3 free");
  EXPECT_DEATH(pool.PeekFreePages(4), "PeekFreePages");
}

TEST(PagePoolTest, AllocateSpecificPreconditions) {
  PagePool pool = MakePool(4, 1);
  pool.AllocateSpecific(Ids({2}));
  EXPECT_DEATH(pool.AllocateSpecific(Ids({2})), "has refcount 1");
  EXPECT_DEATH(pool.AllocateSpecific(Ids({1, 1})), "listed twice");
  EXPECT_DEATH(pool.AllocateSpecific(Ids({9})), "invalid page id");
}

TEST(PagePoolTest, RefAndUnrefTrackOwners) {
  PagePool pool = MakePool(4, 2);
  pool.AllocateSpecific(Ids({1}));
  pool.Ref(PageId(1));
  EXPECT_EQ(pool.RefCount(PageId(1)), 2u);
  pool.Unref(PageId(1));
  EXPECT_FALSE(pool.IsFree(PageId(1)));
  EXPECT_EQ(pool.num_free_pages(), 3u);
  pool.Unref(PageId(1));
  EXPECT_TRUE(pool.IsFree(PageId(1)));
  EXPECT_EQ(pool.num_free_pages(), 4u);
  // The freed page is handed out again, lowest pages first.
  EXPECT_EQ(pool.Allocate(2), Ids({0, 1}));
}

TEST(PagePoolTest, AllocatesLowestFreePagesAscendingWhateverTheFreeOrder) {
  // 130 pages: three bitmap words, the last one partial.
  PagePool pool = MakePool(130, 16);
  pool.Allocate(130);
  for (uint32_t p : {129u, 3u, 70u, 64u, 5u}) pool.Unref(PageId(p));
  EXPECT_EQ(pool.PeekFreePages(5), Ids({3, 5, 64, 70, 129}));
  EXPECT_EQ(pool.Allocate(2), Ids({3, 5}));
  // A page freed below the last allocation is found again first.
  pool.Unref(PageId(1));
  EXPECT_EQ(pool.Allocate(2), Ids({1, 64}));
  pool.Unref(PageId(127));
  EXPECT_EQ(pool.Allocate(3), Ids({70, 127, 129}));
  EXPECT_EQ(pool.num_free_pages(), 0u);
  EXPECT_FALSE(pool.CanAllocate(1));
}

TEST(PagePoolTest, RefUnrefPreconditions) {
  PagePool pool = MakePool(4, 2);
  EXPECT_DEATH(pool.Ref(PageId(0)), "Ref on free page#0");
  EXPECT_DEATH(pool.Unref(PageId(0)), "Unref on free page#0");
  EXPECT_DEATH(pool.Ref(PageId(4)), "invalid page id");
  EXPECT_DEATH(pool.IsFree(PageId(4)), "invalid page id");
  EXPECT_DEATH(pool.RefCount(PageId(100)), "invalid page id");
}

TEST(PagePoolTest, FreeRunsAndFirstFit) {
  PagePool pool = MakePool(10, 4);
  EXPECT_THAT(pool.FreeRuns(), ElementsAre(FreeRun{PageId(0), 10}));
  pool.AllocateSpecific(Ids({0, 3, 4, 8}));
  EXPECT_THAT(pool.FreeRuns(),
              ElementsAre(FreeRun{PageId(1), 2}, FreeRun{PageId(5), 3},
                          FreeRun{PageId(9), 1}));
  EXPECT_EQ(pool.LargestFreeRun(), 3u);
  EXPECT_EQ(pool.FindFreeRun(1), PageId(1));
  EXPECT_EQ(pool.FindFreeRun(2), PageId(1));
  EXPECT_EQ(pool.FindFreeRun(3), PageId(5));
  EXPECT_EQ(pool.FindFreeRun(4), std::nullopt);
  EXPECT_DEATH(pool.FindFreeRun(0), "zero pages");
}

TEST(PagePoolTest, FullPoolHasNoRuns) {
  PagePool pool = MakePool(3, 1);
  pool.Allocate(3);
  EXPECT_TRUE(pool.FreeRuns().empty());
  EXPECT_EQ(pool.LargestFreeRun(), 0u);
  EXPECT_EQ(pool.FindFreeRun(1), std::nullopt);
}

TEST(PagePoolTest, RunsCrossWordBoundaries) {
  PagePool pool = MakePool(200, 1);
  std::vector<PageId> used = Ids({10, 62, 150, 199});
  pool.AllocateSpecific(used);
  EXPECT_THAT(pool.FreeRuns(),
              ElementsAre(FreeRun{PageId(0), 10}, FreeRun{PageId(11), 51},
                          FreeRun{PageId(63), 87}, FreeRun{PageId(151), 48}));
  EXPECT_EQ(pool.FindFreeRun(52), PageId(63));
  EXPECT_EQ(pool.FindFreeRun(87), PageId(63));
  EXPECT_EQ(pool.FindFreeRun(88), std::nullopt);
}

// Cross-checks the bitmap scan against a plain per-page scan.
TEST(PagePoolTest, FindFreeRunMatchesNaiveScanOnRandomPools) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t num_pages = 1 + rng() % 300;
    PagePool pool = MakePool(num_pages, 2);
    for (uint32_t p = 0; p < num_pages; ++p) {
      if (rng() % 3 != 0) pool.AllocateSpecific(Ids({p}));
    }
    for (uint32_t want = 1; want <= 8; ++want) {
      std::optional<PageId> naive;
      uint32_t run = 0;
      for (uint32_t p = 0; p < num_pages && !naive; ++p) {
        run = pool.IsFree(PageId(p)) ? run + 1 : 0;
        if (run == want) naive = PageId(p + 1 - want);
      }
      ASSERT_EQ(pool.FindFreeRun(want), naive)
          << "trial " << trial << " want " << want;
    }
  }
}

TEST(PagePoolTest, ApplyRemapMovesRefcounts) {
  PagePool pool = MakePool(6, 2);
  pool.AllocateSpecific(Ids({3, 4, 5}));
  pool.Ref(PageId(4));
  // 3 -> 0, 4 -> 3 (3 is vacated in the same remap), 5 stays.
  pool.ApplyRemap(Ids({0, 1, 2, 0, 3, 5}));
  EXPECT_EQ(pool.RefCount(PageId(0)), 1u);
  EXPECT_EQ(pool.RefCount(PageId(3)), 2u);
  EXPECT_EQ(pool.RefCount(PageId(4)), 0u);
  EXPECT_EQ(pool.RefCount(PageId(5)), 1u);
  EXPECT_EQ(pool.num_free_pages(), 3u);
  EXPECT_THAT(pool.FreeRuns(),
              ElementsAre(FreeRun{PageId(1), 2}, FreeRun{PageId(4), 1}));
  EXPECT_EQ(pool.Allocate(3), Ids({1, 2, 4}));
}

TEST(PagePoolTest, ApplyRemapPreconditions) {
  PagePool pool = MakePool(4, 2);
  pool.AllocateSpecific(Ids({0, 1}));
  EXPECT_DEATH(pool.ApplyRemap(Ids({0, 1, 2})), "remap size");
  EXPECT_DEATH(pool.ApplyRemap(Ids({2, 2, 2, 3})), "not injective");
  EXPECT_DEATH(pool.ApplyRemap(Ids({1, 1, 2, 3})), "not injective");
  EXPECT_DEATH(pool.ApplyRemap(Ids({7, 1, 2, 3})), "remap of page#0");
}

TEST(PagePoolTest, MillionCellPoolChurnStaysConsistent) {
  PagePool pool = MakePool(1u << 20, 1);
  std::vector<PageId> held = pool.Allocate(1u << 19);
  EXPECT_EQ(pool.num_free_pages(), 1u << 19);
  for (size_t i = 0; i < held.size(); i += 2) pool.Unref(held[i]);
  EXPECT_EQ(pool.num_free_pages(), (1u << 19) + (1u << 18));
  EXPECT_EQ(pool.LargestFreeRun(), 1u << 19);
  EXPECT_EQ(pool.FindFreeRun(2), PageId(1u << 19));
}

}  // namespace
}  // namespace kvault
