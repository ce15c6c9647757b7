// The room planner: decides which idle sequences a KvVault evicts so that a
// number of pages can be placed in its cache. It holds no tensors and moves
// nothing: it reads the cache's bookkeeping (free pages, whether a run of
// pages can be placed under the cache's allocation policy, the pages each
// sequence holds and which of them are shared), asks the eviction policy for
// its order, and asks the vault what only the vault knows of a sequence
// (its LRU stamp, whether it is active, whether a tier could take its state
// file). The vault executes the plan: it evicts through its spill tiers and
// re-checks placement before each eviction. Keeping the decision apart makes
// the check-first rule a pure function, testable without tiers or files.
//
// The room ladder; every turn takes the first rung that applies, and only
// the last one gives up (in the manner of LevelDB's MakeRoomForWrite):
//   1. Placeable now (CanPlace): done, nothing is evicted.
//   2. Check first (Plan), once: unless free pages plus the pages evicting
//      every candidate would free (and, for a restore, the target's own
//      pages) reach the request, fail with ResourceExhausted naming needed
//      vs available pages, evicting nothing. When only the target's own
//      pages make it reachable, the target is spilled before anything else.
//   3. Evict the next candidate in the plan's order (a spillable restore
//      target comes last, as a last resort); one that fails stays resident
//      and the ladder goes on.
//   4. Out of candidates: the first eviction error, else ResourceExhausted
//      (NoRoomError).
//
// Candidates are the resident sequences with cells that are not scratch
// (IsScratchSeq), not protected by the request, not active and spillable,
// in the eviction policy's order. A page shared by several sequences counts
// as freed only when every sequence holding it is evicted.
//
// Not thread-safe: the owner (the vault) serialises every call and keeps
// the cache unchanged while a call runs.
#ifndef KVAULT_KV_ROOM_PLANNER_H_
#define KVAULT_KV_ROOM_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "kv/eviction_policy.h"
#include "kv/kv_cache.h"
#include "kv/kv_types.h"

namespace kvault {

// What the vault knows of a sequence that the cache does not.
struct RoomSeqFacts {
  uint64_t last_use = 0;   // the vault's LRU clock at its last Touch
  bool active = false;     // in use by a running request: never a candidate
  bool spillable = false;  // some tier's budget can hold its state file
};

// A request for room: what to place, what must stay, how errors start.
struct RoomRequest {
  uint64_t num_pages = 0;      // pages to place
  std::vector<SeqId> protect;  // never evicted as candidates
  // A restore's target (also protected): its old pages are replaced
  // anyway, so they count as room when the candidates fall short.
  std::optional<SeqId> own;
  std::string need;  // how errors start: "restore into seq#2 needs ..."
};

// What the check-first rung decided.
struct RoomPlan {
  // True when only the restore target's own pages make the request
  // reachable: the target is spilled before anything else, and if that
  // fails the request fails with `short_of_room`.
  bool target_first = false;
  // The sequences to evict in turn, re-checking CanPlace before each; a
  // spillable restore target that does not go first is the last entry.
  std::vector<SeqId> order;
  // The ResourceExhausted error naming needed vs available pages (set only
  // when target_first).
  Status short_of_room;
};

class RoomPlanner {
 public:
  // Returns what the vault knows of `seq` (it may not be resident).
  using FactsFn = std::function<RoomSeqFacts(SeqId)>;

  // Plans for `cache` (bookkeeping only is read) in `policy`'s eviction
  // order with `facts` from the vault; both references must outlive this.
  RoomPlanner(const KvCache& cache, const EvictionPolicy& policy,
              FactsFn facts);

  // Returns true when `num_pages` pages can be placed now: that many free
  // pages (under contiguous placement without defrag, one run of them).
  bool CanPlace(uint64_t num_pages) const;
  // Returns the eviction candidates not in `protect`, in eviction order.
  std::vector<SeqId> Candidates(std::span<const SeqId> protect) const;
  // Returns how many pages evicting all of `seqs` would free.
  uint64_t PagesFreedByEvicting(std::span<const SeqId> seqs) const;
  // The check-first rung for `request` (for when CanPlace is false):
  // ResourceExhausted unless evicting the plan's sequences can free enough.
  StatusOr<RoomPlan> Plan(const RoomRequest& request) const;
  // Returns the last rung's error for `request` after `num_evicted`
  // evictions left it still unplaceable.
  Status NoRoomError(const RoomRequest& request, size_t num_evicted) const;

 private:
  const KvCache& cache_;
  const EvictionPolicy& policy_;
  FactsFn facts_;
};

}  // namespace kvault

#endif  // KVAULT_KV_ROOM_PLANNER_H_
