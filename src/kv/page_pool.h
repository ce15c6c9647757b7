// PagePool: which pages of the KV pool are free, and how many owners each
// used page has. Pure metadata (no tensor data), in the spirit of nano-vllm's
// block manager: callers check (CanAllocate / IsFree) before they commit, and
// a broken precondition is a KV_CHECK failure, never a half-done change.
// Allocation takes the lowest-numbered free pages, so a sequence that grows
// page by page through a fragmented pool still gets ascending addresses,
// which the CPU's prefetchers follow (BM_AttentionDecode with the pages of
// a fragmented sequence in ascending vs shuffled order: 8.8-9.1 vs
// 9.8-10.2 ms), and used pages gather at the bottom of the pool.
#ifndef KVAULT_KV_PAGE_POOL_H_
#define KVAULT_KV_PAGE_POOL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_types.h"

namespace kvault {

// A maximal run of consecutive free pages [first, first + num_pages).
struct FreeRun {
  PageId first;
  uint32_t num_pages = 0;
  friend bool operator==(const FreeRun&, const FreeRun&) = default;
};

class PagePool {
 public:
  static constexpr uint32_t kMaxPageSize = 256;

  // Returns a pool of `num_pages` free pages of `page_size` cells each;
  // InvalidArgument unless page_size is a power of two in [1, 256] and
  // num_pages >= 1.
  static StatusOr<PagePool> Create(uint32_t num_pages, uint32_t page_size);

  PagePool(PagePool&&) = default;
  PagePool& operator=(PagePool&&) = default;
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // Returns the number of pages (free or not).
  uint32_t num_pages() const { return num_pages_; }
  // Returns the number of cells per page (a power of two).
  uint32_t page_size() const { return page_size_; }
  // Returns the number of pages with refcount 0.
  uint32_t num_free_pages() const { return num_free_; }
  // Returns num_pages() * page_size().
  uint64_t num_cells() const { return uint64_t{num_pages_} * page_size_; }
  // Returns the cell at offset 0 of `page`; precondition: page < num_pages().
  CellId FirstCell(PageId page) const;

  // Returns true when `num_pages` pages could be allocated right now.
  bool CanAllocate(uint32_t num_pages) const {
    return num_pages <= num_free_pages();
  }
  // Returns the pages Allocate(num_pages) would take, in the same order,
  // without taking them; precondition: CanAllocate(num_pages).
  std::vector<PageId> PeekFreePages(uint32_t num_pages) const;
  // Takes the `num_pages` lowest-numbered free pages (refcount becomes 1)
  // and returns them in ascending order; precondition:
  // CanAllocate(num_pages). Scans the free bitmap a word at a time from the
  // lowest word that can hold a free page.
  std::vector<PageId> Allocate(uint32_t num_pages);
  // Takes exactly `pages` (refcount becomes 1); precondition: each is a valid,
  // free page and they are distinct. O(1) per page.
  void AllocateSpecific(std::span<const PageId> pages);

  // Returns true when `page` has refcount 0; precondition: valid page.
  bool IsFree(PageId page) const;
  // Returns the owner count of `page` (0 when free); precondition: valid.
  uint32_t RefCount(PageId page) const;
  // Adds an owner to `page`; precondition: valid and not free.
  void Ref(PageId page);
  // Drops an owner of `page`, freeing it at zero; precondition: not free.
  void Unref(PageId page);

  // Returns the lowest first page of a run of `num_pages` consecutive free
  // pages (first fit), or nullopt; precondition: num_pages >= 1.
  // Scans the free bitmap a 64-bit word at a time.
  std::optional<PageId> FindFreeRun(uint32_t num_pages) const;
  // Returns every maximal run of free pages, in ascending page order.
  std::vector<FreeRun> FreeRuns() const;
  // Returns the length in pages of the longest free run (0 when none free).
  uint32_t LargestFreeRun() const;

  // Renumbers pages after their data was moved: the owners of used page p now
  // own page new_page_of[p]. Entries of free pages are ignored. Precondition:
  // new_page_of.size() == num_pages(), every target valid, and the map
  // injective on used pages (a target may be a page that itself moves away).
  void ApplyRemap(std::span<const PageId> new_page_of);

 private:
  PagePool(uint32_t num_pages, uint32_t page_size);
  void CheckValid(PageId page) const;
  void MarkUsed(PageId page);
  void MarkFree(PageId page);
  // Rebuilds the free count and bitmap from refcounts_.
  void RebuildFreeSets();
  // Returns the first page >= from that is free (want_free) or used, or
  // num_pages_ when there is none.
  uint32_t NextPage(uint32_t from, bool want_free) const;

  uint32_t num_pages_ = 0;
  uint32_t page_size_ = 0;
  std::vector<uint32_t> refcounts_;  // [num_pages]
  uint32_t num_free_ = 0;
  // Bit p%64 of word p/64 is set when page p is free; padding bits are 0.
  std::vector<uint64_t> free_bits_;  // [ceil(num_pages / 64)]
  // No free page lies below page 64 * first_free_word_.
  uint32_t first_free_word_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_KV_PAGE_POOL_H_
