#include "kv/room_planner.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "kv/state_file.h"

namespace kvault {

RoomPlanner::RoomPlanner(const KvCache& cache, const EvictionPolicy& policy,
                         FactsFn facts)
    : cache_(cache), policy_(policy), facts_(std::move(facts)) {}

bool RoomPlanner::CanPlace(uint64_t num_pages) const {
  const PagePool& pool = cache_.pool();
  if (num_pages > pool.num_free_pages()) return false;
  // Such an Append defragments when a placement fails: free pages suffice.
  if (cache_.MayMoveCellsOnAppend()) return true;
  return cache_.table()
      .policy()
      .Choose(pool, static_cast<uint32_t>(num_pages))
      .has_value();
}

std::vector<SeqId> RoomPlanner::Candidates(
    std::span<const SeqId> protect) const {
  std::vector<SeqUsage> usages;
  for (SeqId seq : cache_.table().SequenceIds()) {
    if (IsScratchSeq(seq) ||
        std::find(protect.begin(), protect.end(), seq) != protect.end()) {
      continue;
    }
    const uint64_t num_cells = cache_.table().Length(seq);
    if (num_cells == 0) continue;
    const RoomSeqFacts facts = facts_(seq);
    if (!facts.spillable) continue;
    usages.push_back(SeqUsage{seq, facts.last_use, num_cells, facts.active});
  }
  std::vector<SeqId> order;
  for (SeqId seq : policy_.EvictionOrder(usages)) {
    if (!facts_(seq).active) order.push_back(seq);  // whatever the policy says
  }
  return order;
}

uint64_t RoomPlanner::PagesFreedByEvicting(std::span<const SeqId> seqs) const {
  // A shared page frees only when every sequence holding it goes.
  std::unordered_map<uint32_t, uint32_t> holders;  // page -> evicted holders
  for (SeqId seq : seqs) {
    for (PageId page : cache_.table().Pages(seq)) ++holders[page.value()];
  }
  uint64_t num_freed = 0;
  for (const auto& [page, count] : holders) {
    if (count == cache_.pool().RefCount(PageId(page))) ++num_freed;
  }
  return num_freed;
}

StatusOr<RoomPlan> RoomPlanner::Plan(const RoomRequest& request) const {
  RoomPlan plan;
  plan.order = Candidates(request.protect);
  const uint64_t num_free = cache_.pool().num_free_pages();
  const uint64_t evictable = PagesFreedByEvicting(plan.order);
  const bool own = request.own.has_value() &&
                   cache_.table().Contains(*request.own) &&
                   facts_(*request.own).spillable;
  if (num_free + evictable >= request.num_pages) {
    // The target's pages are the last resort should evictions fail.
    if (own) plan.order.push_back(*request.own);
    return plan;
  }
  Status short_of_room = ResourceExhaustedError(
      request.need + "; free " + std::to_string(num_free) +
      " pages, evictable " + std::to_string(evictable) + " pages");
  if (!own) return short_of_room;
  std::vector<SeqId> with_own = plan.order;
  with_own.push_back(*request.own);
  if (num_free + PagesFreedByEvicting(with_own) < request.num_pages) {
    return short_of_room;
  }
  // Only with the target's own pages is it enough: they go first (a failed
  // restore leaves them spilled, to come back on the slot's next use; a
  // commit discards the copy).
  plan.target_first = true;
  plan.short_of_room = std::move(short_of_room);
  return plan;
}

Status RoomPlanner::NoRoomError(const RoomRequest& request,
                                size_t num_evicted) const {
  return ResourceExhaustedError(
      request.need + "; no room after evicting " + std::to_string(num_evicted) +
      " sequences: " +
      cache_.table().policy().DescribeFailure(
          cache_.pool(), static_cast<uint32_t>(request.num_pages)));
}

}  // namespace kvault
