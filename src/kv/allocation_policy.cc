#include "kv/allocation_policy.h"

#include <string>

namespace kvault {

std::optional<std::vector<PageId>> PagedAllocationPolicy::Choose(
    const PagePool& pool, uint32_t num_pages) const {
  if (!pool.CanAllocate(num_pages)) return std::nullopt;
  return pool.PeekFreePages(num_pages);
}

std::string PagedAllocationPolicy::DescribeFailure(const PagePool& pool,
                                                   uint32_t num_pages) const {
  return "need " + std::to_string(num_pages) + " pages, " +
         std::to_string(pool.num_free_pages()) + " free";
}

std::optional<std::vector<PageId>> ContiguousAllocationPolicy::Choose(
    const PagePool& pool, uint32_t num_pages) const {
  if (num_pages == 0) return std::vector<PageId>();
  std::optional<PageId> first = pool.FindFreeRun(num_pages);
  if (!first.has_value()) return std::nullopt;
  std::vector<PageId> pages;
  pages.reserve(num_pages);
  for (uint32_t i = 0; i < num_pages; ++i) {
    pages.push_back(PageId(first->value() + i));
  }
  return pages;
}

std::string ContiguousAllocationPolicy::DescribeFailure(
    const PagePool& pool, uint32_t num_pages) const {
  return "no run of " + std::to_string(num_pages) +
         " free pages; largest free run is " +
         std::to_string(pool.LargestFreeRun());
}

StatusOr<std::unique_ptr<AllocationPolicy>> MakeAllocationPolicy(
    std::string_view name) {
  if (name == "paged") {
    return std::unique_ptr<AllocationPolicy>(new PagedAllocationPolicy());
  }
  if (name == "contiguous") {
    return std::unique_ptr<AllocationPolicy>(new ContiguousAllocationPolicy());
  }
  return InvalidArgumentError("unknown allocation policy '" +
                              std::string(name) +
                              "'; expected 'paged' or 'contiguous'");
}

}  // namespace kvault
