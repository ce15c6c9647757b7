#include "kv/allocation_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kvault {
namespace {

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

// Pages 0..7 with every odd page used: four free pages, no two adjacent.
PagePool FragmentedPool() {
  PagePool pool = MakePool(8, 16);
  pool.AllocateSpecific(Ids({1, 3, 5, 7}));
  return pool;
}

TEST(AllocationPolicyTest, FactoryKnowsPagedAndContiguous) {
  StatusOr<std::unique_ptr<AllocationPolicy>> paged =
      MakeAllocationPolicy("paged");
  ASSERT_TRUE(paged.ok());
  EXPECT_EQ((*paged)->name(), "paged");
  StatusOr<std::unique_ptr<AllocationPolicy>> contiguous =
      MakeAllocationPolicy("contiguous");
  ASSERT_TRUE(contiguous.ok());
  EXPECT_EQ((*contiguous)->name(), "contiguous");
}

TEST(AllocationPolicyTest, FactoryRejectsUnknownNames) {
  for (const char* name : {"", "Paged", "contiguous+defrag", "best-fit"}) {
    StatusOr<std::unique_ptr<AllocationPolicy>> policy =
        MakeAllocationPolicy(name);
    ASSERT_FALSE(policy.ok()) << name;
    EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(policy.status().message(),
                HasSubstr("unknown allocation policy '" + std::string(name)));
  }
}

TEST(AllocationPolicyTest, PagedTakesAnyFreePages) {
  PagePool pool = FragmentedPool();
  PagedAllocationPolicy policy;
  std::optional<std::vector<PageId>> pages = policy.Choose(pool, 4);
  ASSERT_TRUE(pages.has_value());
  std::set<PageId> chosen(pages->begin(), pages->end());
  EXPECT_EQ(chosen,
            std::set<PageId>({PageId(0), PageId(2), PageId(4), PageId(6)}));
  // Choosing commits nothing.
  EXPECT_EQ(pool.num_free_pages(), 4u);
  pool.AllocateSpecific(*pages);
  EXPECT_EQ(pool.num_free_pages(), 0u);
}

TEST(AllocationPolicyTest, PagedFailsOnlyWhenTooFewFree) {
  PagePool pool = FragmentedPool();
  PagedAllocationPolicy policy;
  EXPECT_EQ(policy.Choose(pool, 5), std::nullopt);
  EXPECT_EQ(policy.DescribeFailure(pool, 5), "need 5 pages, 4 free");
  std::optional<std::vector<PageId>> none = policy.Choose(pool, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

TEST(AllocationPolicyTest, ContiguousFailsOnFragmentedSpaceWherePagedSucceeds) {
  PagePool pool = FragmentedPool();
  ContiguousAllocationPolicy contiguous;
  PagedAllocationPolicy paged;
  EXPECT_EQ(contiguous.Choose(pool, 2), std::nullopt);
  EXPECT_TRUE(paged.Choose(pool, 2).has_value());
  EXPECT_EQ(contiguous.DescribeFailure(pool, 2),
            "no run of 2 free pages; largest free run is 1");
  EXPECT_EQ(contiguous.Choose(pool, 1), Ids({0}));
}

TEST(AllocationPolicyTest, ContiguousIsFirstFit) {
  PagePool pool = MakePool(12, 1);
  pool.AllocateSpecific(Ids({2, 6, 7}));  // free runs: [0,2) [3,6) [8,12)
  ContiguousAllocationPolicy policy;
  EXPECT_EQ(policy.Choose(pool, 2), Ids({0, 1}));
  EXPECT_EQ(policy.Choose(pool, 3), Ids({3, 4, 5}));
  EXPECT_EQ(policy.Choose(pool, 4), Ids({8, 9, 10, 11}));
  EXPECT_EQ(policy.Choose(pool, 5), std::nullopt);
  std::optional<std::vector<PageId>> none = policy.Choose(pool, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace kvault
