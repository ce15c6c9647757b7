// SequenceTable: which pages and cells every sequence owns (no tensor data).
// Logical cell i of a sequence lives in page pages[i / page_size] at offset
// i % page_size. Pages are shared between sequences by refcount (after
// CopySequence) and copied on write. Every mutating call is atomic: it checks
// first, then commits, so on error NOTHING changed. The data copies a call
// needs are returned as CellMoves for the storage to apply, in order, before
// anything else touches the pool.
#ifndef KVAULT_KV_SEQUENCE_TABLE_H_
#define KVAULT_KV_SEQUENCE_TABLE_H_

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "core/status_or.h"
#include "kv/allocation_policy.h"
#include "kv/kv_types.h"
#include "kv/page_pool.h"

namespace kvault {

struct AppendResult {
  // The caller must apply these data copies first (copy-on-write of a shared
  // partially filled tail page).
  CellMoves cow_moves;
  // Where each new token's K/V must be written, one per appended token.
  std::vector<CellId> cells;
};

class SequenceTable {
 public:
  // Uses `pool` and `policy` (neither owned; both must outlive the table).
  // The table assumes it is the only holder of page references in `pool`.
  SequenceTable(PagePool* pool, const AllocationPolicy* policy);
  // Releases every page the table still holds.
  ~SequenceTable();
  SequenceTable(const SequenceTable&) = delete;
  SequenceTable& operator=(const SequenceTable&) = delete;
  // Takes over `other`'s sequences; `other` is left empty.
  SequenceTable(SequenceTable&& other) noexcept;
  // Releases this table's pages, then takes over `other`'s sequences.
  SequenceTable& operator=(SequenceTable&& other) noexcept;

  // --- Growing ----------------------------------------------------------
  // Returns true when Append(seq, <n tokens>) would succeed now.
  bool CanAppend(SeqId seq, uint64_t num_tokens) const;
  // Returns the pages `seq` (absent: a new sequence) must newly take to grow
  // by `num_cells` cells; a shared, partly filled tail page costs one more
  // (copy-on-write).
  uint64_t PagesToGrow(SeqId seq, uint64_t num_cells) const;
  // Appends `tokens` to `seq` (created if absent, even for zero tokens).
  // ResourceExhausted ("Append to seq#3: need 5 pages, 2 free") when the
  // policy cannot place the pages; then nothing changed.
  StatusOr<AppendResult> Append(SeqId seq, std::span<const TokenPos> tokens);

  // --- Editing (sequence_table_edit.cc) ----------------------------------
  // Removes the cells of `seq` whose pos is in [p0, p1) and compacts the rest
  // in order; returns the data moves that shift later cells down (pure
  // truncation moves nothing). Written pages that are shared are first copied
  // into fresh pages (ResourceExhausted if that is impossible); emptied
  // trailing pages are released. Unknown seq: OK, no-op. InvalidArgument when
  // p0 > p1.
  StatusOr<CellMoves> RemoveRange(SeqId seq, Pos p0, Pos p1);
  // Makes `dst` (replaced if present) a copy of `src`'s first `num_cells`
  // cells (all of them by default) that shares the pages holding them; a
  // shared, partly used tail page is copied on dst's first append. NotFound
  // for an unknown src; src == dst is a no-op for the whole sequence and
  // InvalidArgument for a shorter prefix.
  Status CopySequence(SeqId src, SeqId dst, uint64_t num_cells = UINT64_MAX);
  // Moves `from`'s pages and cells into `dst`, releasing dst's old pages;
  // `from` ceases to exist. NotFound for unknown `from`; from == dst no-op.
  Status ReplaceSequence(SeqId dst, SeqId from);
  // Moves `from`'s pages and cells onto the end of `dst` (created if
  // absent); `from` ceases to exist. Metadata only. NotFound for an unknown
  // `from`; InvalidArgument when from == dst or dst's length is not a
  // multiple of the page size (its tail page would be split).
  Status AppendSequence(SeqId dst, SeqId from);
  // Removes every sequence except `seq` (all of them if seq is unknown).
  void KeepOnly(SeqId seq);
  // Removes `seq` and releases its pages; unknown seq is a no-op.
  void RemoveSequence(SeqId seq);
  // Removes every sequence.
  void Clear();
  // Adds `delta` to the pos of `seq`'s cells with pos in [p0, p1); metadata
  // only. Precondition: no shifted pos overflows Pos.
  void ShiftPositions(SeqId seq, Pos p0, Pos p1, Pos delta);

  // --- Queries -----------------------------------------------------------
  // Returns true when `seq` exists (possibly with zero cells).
  bool Contains(SeqId seq) const;
  // Returns the number of cells of `seq` (0 when unknown).
  uint64_t Length(SeqId seq) const;
  // Returns `seq`'s pages in order (empty when unknown); valid until the
  // next mutating call.
  std::span<const PageId> Pages(SeqId seq) const;
  // Returns `seq`'s cells in order (empty when unknown); valid until the
  // next mutating call.
  std::span<const TokenPos> Cells(SeqId seq) const;
  // Returns the pool cell of `seq`'s logical cell `index`; precondition:
  // index < Length(seq).
  CellId CellAt(SeqId seq, uint64_t index) const;
  // Returns the ids of all sequences, ascending.
  std::vector<SeqId> SequenceIds() const;
  // Returns the number of distinct pool cells holding a token (a cell shared
  // by several sequences counts once). O(number of sequences).
  uint64_t num_used_cells() const;
  // Returns the pool this table allocates from.
  const PagePool& pool() const { return *pool_; }
  // Returns the policy this table allocates with.
  const AllocationPolicy& policy() const { return *policy_; }

  // --- Defragmentation support (sequence_table_edit.cc) -------------------
  // Returns each sequence's page list, in SequenceIds() order.
  std::vector<std::vector<PageId>> SequencePageLists() const;
  // After the data of every used page p was moved to page new_page_of[p]
  // (identity for pages that did not move and for free pages), renumbers all
  // page lists and pool refcounts. Precondition: as PagePool::ApplyRemap.
  void ApplyPageRemap(std::span<const PageId> new_page_of);

 private:
  struct Sequence {
    std::vector<PageId> pages;
    std::vector<TokenPos> cells;
  };
  // Pages an append must take: `cow` says whether the first replaces a
  // shared partially filled tail page.
  struct AppendPlan {
    bool cow = false;
    std::vector<PageId> fresh;
  };

  StatusOr<AppendPlan> PlanAppend(SeqId seq, uint64_t num_tokens) const;
  const Sequence* Find(SeqId seq) const;

  PagePool* pool_;
  const AllocationPolicy* policy_;
  std::map<SeqId, Sequence> seqs_;
};

// Returns Internal describing the first broken invariant of `table` and its
// pool (sequence_table_check.cc): refcount of every page == number of
// sequences listing it, no page listed twice by one sequence, page counts
// match lengths, free + used == total.
Status CheckInvariants(const SequenceTable& table);

}  // namespace kvault

#endif  // KVAULT_KV_SEQUENCE_TABLE_H_
