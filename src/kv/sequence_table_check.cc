// CheckInvariants(SequenceTable): the table and the pool agree exactly.
#include <string>
#include <vector>

#include "kv/sequence_table.h"

namespace kvault {
namespace {

std::string Str(uint64_t v) { return std::to_string(v); }

// Checks that the pool's free count, free bitmap and refcounts agree.
Status CheckPoolFreeSets(const PagePool& pool) {
  uint64_t num_zero = 0;
  for (uint32_t p = 0; p < pool.num_pages(); ++p) {
    if (pool.RefCount(PageId(p)) == 0) ++num_zero;
  }
  uint64_t num_in_runs = 0;
  for (const FreeRun& run : pool.FreeRuns()) {
    for (uint32_t i = 0; i < run.num_pages; ++i) {
      if (!pool.IsFree(PageId(run.first.value() + i))) {
        return InternalError("free bitmap lists used page#" +
                             Str(run.first.value() + i));
      }
    }
    num_in_runs += run.num_pages;
  }
  std::vector<bool> listed(pool.num_pages(), false);
  for (PageId page : pool.PeekFreePages(pool.num_free_pages())) {
    if (!pool.IsFree(page) || listed[page.value()]) {
      return InternalError("free pages listed include used or repeated " +
                           Str(page.value()));
    }
    listed[page.value()] = true;
  }
  if (num_zero != pool.num_free_pages() || num_in_runs != num_zero) {
    return InternalError(Str(num_zero) + " pages have refcount 0, free count " +
                         "holds " + Str(pool.num_free_pages()) +
                         ", free bitmap " + Str(num_in_runs));
  }
  return Status::Ok();
}

}  // namespace

Status CheckInvariants(const SequenceTable& table) {
  const PagePool& pool = table.pool();
  std::vector<uint32_t> refs(pool.num_pages(), 0);         // [num_pages]
  std::vector<uint32_t> last_lister(pool.num_pages(), 0);  // [num_pages]
  uint32_t ordinal = 0;
  for (SeqId id : table.SequenceIds()) {
    ++ordinal;
    const std::string where = "seq#" + Str(id.value());
    const std::span<const PageId> pages = table.Pages(id);
    const uint64_t expected = PagesForCells(table.Length(id), pool.page_size());
    if (pages.size() != expected) {
      return InternalError(where + " has " + Str(pages.size()) + " pages for " +
                           Str(table.Length(id)) + " cells; expected " +
                           Str(expected));
    }
    for (PageId page : pages) {
      if (page.value() >= pool.num_pages()) {
        return InternalError(where + " lists invalid page#" +
                             Str(page.value()));
      }
      if (last_lister[page.value()] == ordinal) {
        return InternalError(where + " lists page#" + Str(page.value()) +
                             " twice");
      }
      last_lister[page.value()] = ordinal;
      ++refs[page.value()];
    }
  }
  for (uint32_t p = 0; p < pool.num_pages(); ++p) {
    if (refs[p] != pool.RefCount(PageId(p))) {
      return InternalError("page#" + Str(p) + " has refcount " +
                           Str(pool.RefCount(PageId(p))) + " but " +
                           Str(refs[p]) + " sequences list it");
    }
  }
  return CheckPoolFreeSets(pool);
}

}  // namespace kvault
