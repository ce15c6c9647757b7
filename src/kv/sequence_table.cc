// SequenceTable: construction, appends and queries. Edits live in
// sequence_table_edit.cc, invariant checks in sequence_table_check.cc.
#include "kv/sequence_table.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

#include "core/check.h"

namespace kvault {
namespace {

// Returns the pool cell of logical cell `index` in `pages`.
CellId CellIn(uint32_t page_size, std::span<const PageId> pages,
              uint64_t index) {
  const int shift = std::countr_zero(page_size);
  const uint64_t offset = index & (uint64_t{page_size} - 1);
  return CellId((uint64_t{pages[index >> shift].value()} << shift) | offset);
}

// Returns true when a sequence of `num_cells` cells in `pages` has a partly
// filled tail page that others share: the next append must copy it first.
bool TailNeedsCopy(const PagePool& pool, std::span<const PageId> pages,
                   uint64_t num_cells) {
  return num_cells % pool.page_size() != 0 && pool.RefCount(pages.back()) > 1;
}

}  // namespace

SequenceTable::SequenceTable(PagePool* pool, const AllocationPolicy* policy)
    : pool_(pool), policy_(policy) {
  KV_CHECK(pool_ != nullptr);
  KV_CHECK(policy_ != nullptr);
}

SequenceTable::~SequenceTable() { Clear(); }

SequenceTable::SequenceTable(SequenceTable&& other) noexcept
    : pool_(other.pool_),
      policy_(other.policy_),
      seqs_(std::exchange(other.seqs_, {})) {}

SequenceTable& SequenceTable::operator=(SequenceTable&& other) noexcept {
  if (this == &other) return *this;
  Clear();
  pool_ = other.pool_;
  policy_ = other.policy_;
  seqs_ = std::exchange(other.seqs_, {});
  return *this;
}

bool SequenceTable::CanAppend(SeqId seq, uint64_t num_tokens) const {
  return PlanAppend(seq, num_tokens).ok();
}

StatusOr<AppendResult> SequenceTable::Append(SeqId seq,
                                             std::span<const TokenPos> tokens) {
  KV_ASSIGN_OR_RETURN(AppendPlan plan, PlanAppend(seq, tokens.size()));
  // Everything below is infallible: the plan's pages are free.
  Sequence& s = seqs_[seq];
  const uint64_t old_len = s.cells.size();
  pool_->AllocateSpecific(plan.fresh);
  AppendResult result;
  auto next = plan.fresh.begin();
  if (plan.cow) {
    PageId shared = s.pages.back();
    PageId copy = *next++;
    result.cow_moves.push_back(CellMove{pool_->FirstCell(shared),
                                        pool_->FirstCell(copy),
                                        old_len % pool_->page_size()});
    pool_->Unref(shared);
    s.pages.back() = copy;
  }
  s.pages.insert(s.pages.end(), next, plan.fresh.end());
  s.cells.insert(s.cells.end(), tokens.begin(), tokens.end());
  result.cells.reserve(tokens.size());
  for (uint64_t i = old_len; i < s.cells.size(); ++i) {
    result.cells.push_back(CellIn(pool_->page_size(), s.pages, i));
  }
  return result;
}

StatusOr<SequenceTable::AppendPlan> SequenceTable::PlanAppend(
    SeqId seq, uint64_t num_tokens) const {
  AppendPlan plan;
  if (num_tokens == 0) return plan;
  const Sequence* s = Find(seq);
  plan.cow = s != nullptr && TailNeedsCopy(*pool_, s->pages, s->cells.size());
  uint64_t num_needed = UINT32_MAX;  // saturates absurd requests
  if (num_tokens <= pool_->num_cells()) {
    num_needed = PagesToGrow(seq, num_tokens);
  }
  const uint32_t needed32 =
      static_cast<uint32_t>(std::min<uint64_t>(num_needed, UINT32_MAX));
  std::optional<std::vector<PageId>> chosen;
  if (num_needed < UINT32_MAX) chosen = policy_->Choose(*pool_, needed32);
  if (!chosen.has_value()) {
    return ResourceExhaustedError("Append to seq#" +
                                  std::to_string(seq.value()) + ": " +
                                  policy_->DescribeFailure(*pool_, needed32));
  }
  KV_CHECK_EQ(chosen->size(), size_t{needed32})
      << "policy " << policy_->name() << " chose the wrong number of pages";
  plan.fresh = std::move(*chosen);
  return plan;
}

uint64_t SequenceTable::PagesToGrow(SeqId seq, uint64_t num_cells) const {
  if (num_cells == 0) return 0;
  const Sequence* s = Find(seq);
  const uint32_t page_size = pool_->page_size();
  if (s == nullptr) return PagesForCells(num_cells, page_size);
  return PagesForCells(s->cells.size() + num_cells, page_size) -
         s->pages.size() +
         (TailNeedsCopy(*pool_, s->pages, s->cells.size()) ? 1 : 0);
}

bool SequenceTable::Contains(SeqId seq) const { return Find(seq) != nullptr; }

uint64_t SequenceTable::Length(SeqId seq) const {
  const Sequence* s = Find(seq);
  return s != nullptr ? s->cells.size() : 0;
}

std::span<const PageId> SequenceTable::Pages(SeqId seq) const {
  const Sequence* s = Find(seq);
  if (s == nullptr) return {};
  return s->pages;
}

std::span<const TokenPos> SequenceTable::Cells(SeqId seq) const {
  const Sequence* s = Find(seq);
  if (s == nullptr) return {};
  return s->cells;
}

CellId SequenceTable::CellAt(SeqId seq, uint64_t index) const {
  const Sequence* s = Find(seq);
  KV_CHECK(s != nullptr) << "CellAt on unknown " << seq;
  KV_CHECK_LT(index, s->cells.size()) << "CellAt past the end of " << seq;
  return CellIn(pool_->page_size(), s->pages, index);
}

std::vector<SeqId> SequenceTable::SequenceIds() const {
  std::vector<SeqId> ids;
  ids.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) ids.push_back(id);
  return ids;
}

uint64_t SequenceTable::num_used_cells() const {
  const uint32_t page_size = pool_->page_size();
  uint64_t used =
      uint64_t{pool_->num_pages() - pool_->num_free_pages()} * page_size;
  // Only partially filled tail pages hold empty cells, and such a page is
  // partly empty only if every sequence listing it has it as partial tail.
  std::vector<std::pair<PageId, uint32_t>> tails;  // (page, filled cells)
  for (const auto& [id, s] : seqs_) {
    uint32_t fill = static_cast<uint32_t>(s.cells.size() % page_size);
    if (fill != 0) tails.emplace_back(s.pages.back(), fill);
  }
  std::sort(tails.begin(), tails.end());
  for (size_t i = 0; i < tails.size();) {
    size_t end = i;
    while (end < tails.size() && tails[end].first == tails[i].first) ++end;
    // Sorted, so the group's last entry has the largest fill.
    if (end - i == pool_->RefCount(tails[i].first)) {
      used -= page_size - tails[end - 1].second;
    }
    i = end;
  }
  return used;
}

const SequenceTable::Sequence* SequenceTable::Find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it != seqs_.end() ? &it->second : nullptr;
}

}  // namespace kvault
