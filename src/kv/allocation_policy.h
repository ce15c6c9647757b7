// AllocationPolicy: decides WHICH free pages a new allocation uses. It only
// chooses; the caller commits with PagePool::AllocateSpecific, so a policy
// that cannot place the pages leaves the pool untouched.
#ifndef KVAULT_KV_ALLOCATION_POLICY_H_
#define KVAULT_KV_ALLOCATION_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "kv/page_pool.h"

namespace kvault {

class AllocationPolicy {
 public:
  virtual ~AllocationPolicy() = default;

  // Returns `num_pages` distinct free pages of `pool` to allocate, in the
  // order the caller should use them, or nullopt when this policy cannot
  // place them now. Choosing zero pages always succeeds (empty list).
  virtual std::optional<std::vector<PageId>> Choose(
      const PagePool& pool, uint32_t num_pages) const = 0;
  // Returns why Choose(pool, num_pages) fails, e.g. "need 5 pages, 2 free".
  virtual std::string DescribeFailure(const PagePool& pool,
                                      uint32_t num_pages) const = 0;
  // Returns the name the factory accepts for this policy.
  virtual std::string_view name() const = 0;
};

// Any free pages (the pool's own order, lowest first): fails only when too
// few are free.
class PagedAllocationPolicy final : public AllocationPolicy {
 public:
  // Returns the `num_pages` lowest free pages, or nullopt.
  std::optional<std::vector<PageId>> Choose(const PagePool& pool,
                                            uint32_t num_pages) const override;
  // Returns "need N pages, M free".
  std::string DescribeFailure(const PagePool& pool,
                              uint32_t num_pages) const override;
  // Returns "paged".
  std::string_view name() const override { return "paged"; }
};

// One run of consecutive free pages, first fit (llama.cpp's behaviour): fails
// on fragmented free space even when enough pages are free in total.
class ContiguousAllocationPolicy final : public AllocationPolicy {
 public:
  // Returns the lowest run of `num_pages` consecutive free pages, or nullopt.
  std::optional<std::vector<PageId>> Choose(const PagePool& pool,
                                            uint32_t num_pages) const override;
  // Returns "no run of N free pages; largest free run is M".
  std::string DescribeFailure(const PagePool& pool,
                              uint32_t num_pages) const override;
  // Returns "contiguous".
  std::string_view name() const override { return "contiguous"; }
};

// Returns the policy called `name` ("paged" or "contiguous"); InvalidArgument
// for any other name.
StatusOr<std::unique_ptr<AllocationPolicy>> MakeAllocationPolicy(
    std::string_view name);

}  // namespace kvault

#endif  // KVAULT_KV_ALLOCATION_POLICY_H_
