#include "kv/page_pool.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/check.h"

namespace kvault {

StatusOr<PagePool> PagePool::Create(uint32_t num_pages, uint32_t page_size) {
  if (page_size == 0 || page_size > kMaxPageSize ||
      !std::has_single_bit(page_size)) {
    return InvalidArgumentError(
        "PagePool: page_size must be a power of two in [1, 256], got " +
        std::to_string(page_size));
  }
  if (num_pages == 0) {
    return InvalidArgumentError("PagePool: num_pages must be >= 1, got 0");
  }
  return PagePool(num_pages, page_size);
}

PagePool::PagePool(uint32_t num_pages, uint32_t page_size)
    : num_pages_(num_pages),
      page_size_(page_size),
      refcounts_(num_pages, 0),
      free_bits_((uint64_t{num_pages} + 63) / 64, 0) {
  RebuildFreeSets();
}

CellId PagePool::FirstCell(PageId page) const {
  CheckValid(page);
  return CellId(uint64_t{page.value()} * page_size_);
}

std::vector<PageId> PagePool::PeekFreePages(uint32_t num_pages) const {
  KV_CHECK(CanAllocate(num_pages)) << "PeekFreePages(" << num_pages << ") with "
                                   << num_free_pages() << " free";
  std::vector<PageId> pages;
  pages.reserve(num_pages);
  // Padding bits are 0, so every set bit is a valid free page.
  for (size_t w = first_free_word_; pages.size() < num_pages; ++w) {
    for (uint64_t word = free_bits_[w]; word != 0 && pages.size() < num_pages;
         word &= word - 1) {
      pages.push_back(PageId(static_cast<uint32_t>(
          w * 64 + static_cast<uint32_t>(std::countr_zero(word)))));
    }
  }
  return pages;
}

std::vector<PageId> PagePool::Allocate(uint32_t num_pages) {
  KV_CHECK(CanAllocate(num_pages))
      << "Allocate(" << num_pages << ") with " << num_free_pages() << " free";
  std::vector<PageId> pages = PeekFreePages(num_pages);
  for (PageId page : pages) MarkUsed(page);
  // Every page below the last one taken is now used.
  if (!pages.empty()) first_free_word_ = pages.back().value() / 64;
  return pages;
}

void PagePool::AllocateSpecific(std::span<const PageId> pages) {
  // Validate everything first so a failed check never leaves a partial
  // allocation behind (the abort makes it moot, but the message is clearer).
  for (PageId page : pages) {
    KV_CHECK(IsFree(page)) << "AllocateSpecific: " << page << " has refcount "
                           << refcounts_[page.value()];
  }
  for (PageId page : pages) {
    KV_CHECK(IsFree(page)) << "AllocateSpecific: " << page << " listed twice";
    MarkUsed(page);
  }
}

bool PagePool::IsFree(PageId page) const {
  CheckValid(page);
  return refcounts_[page.value()] == 0;
}

uint32_t PagePool::RefCount(PageId page) const {
  CheckValid(page);
  return refcounts_[page.value()];
}

void PagePool::Ref(PageId page) {
  KV_CHECK(!IsFree(page)) << "Ref on free " << page;
  KV_CHECK_LT(refcounts_[page.value()], UINT32_MAX) << page;
  ++refcounts_[page.value()];
}

void PagePool::Unref(PageId page) {
  KV_CHECK(!IsFree(page)) << "Unref on free " << page;
  if (--refcounts_[page.value()] == 0) MarkFree(page);
}

std::optional<PageId> PagePool::FindFreeRun(uint32_t num_pages) const {
  KV_CHECK_GT(num_pages, 0u) << "FindFreeRun of zero pages";
  if (num_pages > num_free_pages()) return std::nullopt;
  uint32_t begin = NextPage(0, /*want_free=*/true);
  while (begin < num_pages_) {
    uint32_t end = NextPage(begin, /*want_free=*/false);
    if (end - begin >= num_pages) return PageId(begin);
    begin = NextPage(end, /*want_free=*/true);
  }
  return std::nullopt;
}

std::vector<FreeRun> PagePool::FreeRuns() const {
  std::vector<FreeRun> runs;
  uint32_t begin = NextPage(0, /*want_free=*/true);
  while (begin < num_pages_) {
    uint32_t end = NextPage(begin, /*want_free=*/false);
    runs.push_back(FreeRun{PageId(begin), end - begin});
    begin = NextPage(end, /*want_free=*/true);
  }
  return runs;
}

uint32_t PagePool::LargestFreeRun() const {
  uint32_t largest = 0;
  for (const FreeRun& run : FreeRuns()) {
    largest = std::max(largest, run.num_pages);
  }
  return largest;
}

void PagePool::ApplyRemap(std::span<const PageId> new_page_of) {
  KV_CHECK_EQ(new_page_of.size(), size_t{num_pages_}) << "remap size";
  std::vector<uint32_t> remapped(num_pages_, 0);  // [num_pages]
  for (uint32_t p = 0; p < num_pages_; ++p) {
    if (refcounts_[p] == 0) continue;
    PageId target = new_page_of[p];
    KV_CHECK_LT(target.value(), num_pages_) << "remap of page#" << p;
    KV_CHECK_EQ(remapped[target.value()], 0u)
        << "remap is not injective on used pages: page#" << p << " -> "
        << target << " collides";
    remapped[target.value()] = refcounts_[p];
  }
  refcounts_ = std::move(remapped);
  RebuildFreeSets();
}

void PagePool::CheckValid(PageId page) const {
  KV_CHECK_LT(page.value(), num_pages_) << "invalid page id";
}

void PagePool::MarkUsed(PageId page) {
  uint32_t p = page.value();
  --num_free_;
  free_bits_[p / 64] &= ~(uint64_t{1} << (p % 64));
  refcounts_[p] = 1;
}

void PagePool::MarkFree(PageId page) {
  uint32_t p = page.value();
  ++num_free_;
  free_bits_[p / 64] |= uint64_t{1} << (p % 64);
  first_free_word_ = std::min(first_free_word_, p / 64);
}

void PagePool::RebuildFreeSets() {
  num_free_ = 0;
  first_free_word_ = 0;
  std::fill(free_bits_.begin(), free_bits_.end(), 0);
  for (uint32_t p = 0; p < num_pages_; ++p) {
    if (refcounts_[p] == 0) MarkFree(PageId(p));
  }
}

uint32_t PagePool::NextPage(uint32_t from, bool want_free) const {
  if (from >= num_pages_) return num_pages_;
  size_t w = from / 64;
  uint64_t word = want_free ? free_bits_[w] : ~free_bits_[w];
  word &= ~uint64_t{0} << (from % 64);
  while (word == 0) {
    if (++w == free_bits_.size()) return num_pages_;
    word = want_free ? free_bits_[w] : ~free_bits_[w];
  }
  // Inverted padding bits read as "used" past the end; clamp them.
  uint64_t page = w * 64 + std::countr_zero(word);
  return static_cast<uint32_t>(std::min<uint64_t>(page, num_pages_));
}

}  // namespace kvault
