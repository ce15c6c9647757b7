// SequenceTable: removing, copying, replacing, shifting and remapping.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/check.h"
#include "kv/sequence_table.h"

namespace kvault {
namespace {

std::string SeqName(SeqId seq) { return "seq#" + std::to_string(seq.value()); }

bool InRange(Pos pos, Pos p0, Pos p1) { return pos >= p0 && pos < p1; }

// The shape of a RemoveRange: cells before `first_removed` stay where they
// are; new cell first_removed + k comes from old cell kept_src[k]. Pages
// [first_written, new_num_pages) get rewritten; cow_slots are those of them
// that are shared and so must be copied to fresh pages first.
struct Compaction {
  uint64_t first_removed = 0;
  std::vector<uint64_t> kept_src;
  uint64_t new_num_pages = 0;
  uint64_t first_written = 0;
  std::vector<uint64_t> cow_slots;
};

std::optional<Compaction> PlanCompaction(const PagePool& pool,
                                         std::span<const PageId> pages,
                                         std::span<const TokenPos> cells,
                                         Pos p0, Pos p1) {
  auto first = std::find_if(cells.begin(), cells.end(),
                            [&](TokenPos c) { return InRange(c.pos, p0, p1); });
  if (first == cells.end()) return std::nullopt;
  Compaction plan;
  plan.first_removed = static_cast<uint64_t>(first - cells.begin());
  for (uint64_t i = plan.first_removed + 1; i < cells.size(); ++i) {
    if (!InRange(cells[i].pos, p0, p1)) plan.kept_src.push_back(i);
  }
  const uint32_t page_size = pool.page_size();
  const uint64_t new_len = plan.first_removed + plan.kept_src.size();
  plan.new_num_pages = PagesForCells(new_len, page_size);
  // Pages from the one holding the first removed cell on get rewritten,
  // unless nothing is kept after it (pure truncation).
  plan.first_written = plan.kept_src.empty() ? plan.new_num_pages
                                             : plan.first_removed / page_size;
  for (uint64_t k = plan.first_written; k < plan.new_num_pages; ++k) {
    if (pool.RefCount(pages[k]) > 1) plan.cow_slots.push_back(k);
  }
  return plan;
}

CellId PoolCell(std::span<const PageId> pages, uint32_t page_size,
                uint64_t index) {
  return CellId(uint64_t{pages[index / page_size].value()} * page_size +
                index % page_size);
}

// Appends a one-cell copy, growing the previous move when it continues it
// and the grown source and destination ranges stay disjoint (a CellMove's
// ranges never overlap).
void AddCellCopy(CellMoves* moves, CellId src, CellId dst) {
  if (!moves->empty()) {
    CellMove& last = moves->back();
    const uint64_t s = last.src.value();
    const uint64_t d = last.dst.value();
    const uint64_t grown = last.count + 1;
    if (s + last.count == src.value() && d + last.count == dst.value() &&
        (s + grown <= d || d + grown <= s)) {
      last.count = grown;
      return;
    }
  }
  moves->push_back(CellMove{src, dst, 1});
}

// Returns the copies that take new cells [begin, new_len) from their old
// place in `old_pages` to their new place in `new_pages`. Ascending order is
// safe: a new index never exceeds its old one, and CoW targets are fresh.
CellMoves CompactionMoves(const Compaction& plan,
                          std::span<const PageId> old_pages,
                          std::span<const PageId> new_pages, uint32_t page_size,
                          uint64_t begin) {
  CellMoves moves;
  const uint64_t new_len = plan.first_removed + plan.kept_src.size();
  for (uint64_t j = begin; j < new_len; ++j) {
    const uint64_t src_index =
        j < plan.first_removed ? j : plan.kept_src[j - plan.first_removed];
    CellId src = PoolCell(old_pages, page_size, src_index);
    CellId dst = PoolCell(new_pages, page_size, j);
    if (src != dst) AddCellCopy(&moves, src, dst);
  }
  return moves;
}

}  // namespace

StatusOr<CellMoves> SequenceTable::RemoveRange(SeqId seq, Pos p0, Pos p1) {
  if (p0 > p1) {
    return InvalidArgumentError("RemoveRange on " + SeqName(seq) + ": p0 " +
                                std::to_string(p0) + " > p1 " +
                                std::to_string(p1));
  }
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return CellMoves();
  Sequence& s = it->second;
  std::optional<Compaction> plan =
      PlanCompaction(*pool_, s.pages, s.cells, p0, p1);
  if (!plan.has_value()) return CellMoves();
  // Fresh pages are taken before anything is released, so a page whose
  // cells are still to be read is never handed out as a copy target.
  const uint32_t num_cow = static_cast<uint32_t>(plan->cow_slots.size());
  std::optional<std::vector<PageId>> fresh = policy_->Choose(*pool_, num_cow);
  if (!fresh.has_value()) {
    return ResourceExhaustedError(
        "RemoveRange on " + SeqName(seq) +
        ": copy-on-write: " + policy_->DescribeFailure(*pool_, num_cow));
  }
  KV_CHECK_EQ(fresh->size(), size_t{num_cow}) << "policy " << policy_->name();
  pool_->AllocateSpecific(*fresh);
  std::vector<PageId> new_pages(s.pages.begin(),
                                s.pages.begin() + plan->new_num_pages);
  for (size_t c = 0; c < num_cow; ++c) {
    new_pages[plan->cow_slots[c]] = (*fresh)[c];
  }
  const uint32_t page_size = pool_->page_size();
  CellMoves moves = CompactionMoves(*plan, s.pages, new_pages, page_size,
                                    plan->first_written * page_size);
  for (uint64_t k : plan->cow_slots) pool_->Unref(s.pages[k]);
  for (uint64_t k = plan->new_num_pages; k < s.pages.size(); ++k) {
    pool_->Unref(s.pages[k]);
  }
  s.pages = std::move(new_pages);
  std::erase_if(s.cells, [&](TokenPos c) { return InRange(c.pos, p0, p1); });
  return moves;
}

Status SequenceTable::CopySequence(SeqId src, SeqId dst, uint64_t num_cells) {
  auto it = seqs_.find(src);
  if (it == seqs_.end()) {
    return NotFoundError("CopySequence: source " + SeqName(src) +
                         " does not exist");
  }
  const uint64_t length = it->second.cells.size();
  num_cells = std::min(num_cells, length);
  if (src == dst) {
    if (num_cells == length) return Status::Ok();
    return InvalidArgumentError("CopySequence: a prefix of " + SeqName(src) +
                                " onto itself (truncate with RemoveRange)");
  }
  Sequence copy;
  copy.cells.assign(it->second.cells.begin(),
                    it->second.cells.begin() + num_cells);
  copy.pages.assign(
      it->second.pages.begin(),
      it->second.pages.begin() + PagesForCells(num_cells, pool_->page_size()));
  for (PageId page : copy.pages) pool_->Ref(page);
  RemoveSequence(dst);
  seqs_[dst] = std::move(copy);
  return Status::Ok();
}

Status SequenceTable::ReplaceSequence(SeqId dst, SeqId from) {
  auto it = seqs_.find(from);
  if (it == seqs_.end()) {
    return NotFoundError("ReplaceSequence of " + SeqName(dst) + ": source " +
                         SeqName(from) + " does not exist");
  }
  if (from == dst) return Status::Ok();
  Sequence moved = std::move(it->second);
  seqs_.erase(it);
  RemoveSequence(dst);
  seqs_[dst] = std::move(moved);
  return Status::Ok();
}

Status SequenceTable::AppendSequence(SeqId dst, SeqId from) {
  auto it = seqs_.find(from);
  if (it == seqs_.end()) {
    return NotFoundError("AppendSequence onto " + SeqName(dst) + ": source " +
                         SeqName(from) + " does not exist");
  }
  if (from == dst) {
    return InvalidArgumentError("AppendSequence: " + SeqName(dst) +
                                " onto itself");
  }
  Sequence& d = seqs_[dst];
  if (d.cells.size() % pool_->page_size() != 0) {
    return InvalidArgumentError("AppendSequence onto " + SeqName(dst) +
                                ": its " + std::to_string(d.cells.size()) +
                                " cells end inside a page of " +
                                std::to_string(pool_->page_size()));
  }
  Sequence moved = std::move(it->second);
  seqs_.erase(it);
  d.pages.insert(d.pages.end(), moved.pages.begin(), moved.pages.end());
  d.cells.insert(d.cells.end(), moved.cells.begin(), moved.cells.end());
  return Status::Ok();
}

void SequenceTable::KeepOnly(SeqId seq) {
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if (it->first == seq) {
      ++it;
      continue;
    }
    for (PageId page : it->second.pages) pool_->Unref(page);
    it = seqs_.erase(it);
  }
}

void SequenceTable::RemoveSequence(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  for (PageId page : it->second.pages) pool_->Unref(page);
  seqs_.erase(it);
}

void SequenceTable::Clear() {
  for (const auto& [id, s] : seqs_) {
    for (PageId page : s.pages) pool_->Unref(page);
  }
  seqs_.clear();
}

void SequenceTable::ShiftPositions(SeqId seq, Pos p0, Pos p1, Pos delta) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  using Limits = std::numeric_limits<Pos>;
  for (TokenPos& cell : it->second.cells) {
    if (!InRange(cell.pos, p0, p1)) continue;
    const int64_t shifted = int64_t{cell.pos} + delta;
    KV_CHECK(shifted >= Limits::min() && shifted <= Limits::max())
        << "ShiftPositions on " << seq << ": pos " << cell.pos << " + " << delta
        << " overflows";
    cell.pos = static_cast<Pos>(shifted);
  }
}

std::vector<std::vector<PageId>> SequenceTable::SequencePageLists() const {
  std::vector<std::vector<PageId>> lists;
  lists.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) lists.push_back(s.pages);
  return lists;
}

void SequenceTable::ApplyPageRemap(std::span<const PageId> new_page_of) {
  // The pool validates the map (size, range, injectivity on used pages);
  // every page a sequence lists is used, so the lookups below are in range.
  pool_->ApplyRemap(new_page_of);
  for (auto& [id, s] : seqs_) {
    for (PageId& page : s.pages) page = new_page_of[page.value()];
  }
}

}  // namespace kvault
