// The defrag planner: a pure function from page occupancy to the cell moves
// that make every sequence contiguous and in order, with all used pages in
// one prefix [0, U) and the free space one run at the end. It touches no
// data: KvStorage::ApplyMoves(plan.moves) moves the bytes, then
// SequenceTable::ApplyPageRemap(plan.new_page_of) fixes the bookkeeping.
#ifndef KVAULT_KV_DEFRAG_PLANNER_H_
#define KVAULT_KV_DEFRAG_PLANNER_H_

#include <cstdint>
#include <vector>

#include "kv/kv_types.h"

namespace kvault {

struct DefragInput {
  uint32_t num_pages = 0;
  uint32_t page_size = 0;  // cells per page, > 0
  // Each sequence's ordered page list. A page listed by several sequences
  // (shared by refcount) is used once; every listed page is used, all other
  // pages are free. Page ids must be < num_pages.
  std::vector<std::vector<PageId>> seq_pages;
};

struct DefragPlan {
  // Apply in order. Each move's src and dst ranges are disjoint and no move
  // overwrites a cell a later move still reads.
  CellMoves moves;
  // [num_pages] A permutation: new_page_of[p] is where page p's content
  // lives after the moves. Unmoved used pages and free pages >= U map to
  // themselves; free pages < U (their content is garbage) take the slots
  // that used pages moved out of [U, num_pages) left behind.
  std::vector<PageId> new_page_of;
  // U: the number of distinct used pages, which end up as [0, U) (except in
  // a full pool with cycles left in place, where U == num_pages anyway).
  uint32_t num_used_pages = 0;
  // Sum of the moves' counts (cycle breaking through scratch counts twice).
  uint64_t cells_moved = 0;
  // page_size * (used pages at index >= U): those must move in any plan.
  uint64_t lower_bound_cells = 0;
  // Sequences whose pages sit on a move cycle that could not be broken
  // because the pool has no free page; they stay (partly) where they were.
  uint32_t num_sequences_left_fragmented = 0;
  std::vector<uint32_t> left_fragmented;  // indices into seq_pages, ascending
};

// Plans the defragmentation of `input`. A shared page is placed with the
// first sequence (in input order) that lists it; each sequence's own pages
// (the ones it lists first) end up consecutive and in list order, and later
// listers keep pointing at it through new_page_of. O(pages log pages).
DefragPlan PlanDefrag(const DefragInput& input);

}  // namespace kvault

#endif  // KVAULT_KV_DEFRAG_PLANNER_H_
