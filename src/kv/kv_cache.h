// KvCache: the facade the engine uses. Owns the page pool, the allocation
// policy, the sequence table and (optionally) the K/V storage, and keeps data
// and bookkeeping in step: every CellMove the table asks for is applied to
// storage before the call returns.
#ifndef KVAULT_KV_KV_CACHE_H_
#define KVAULT_KV_KV_CACHE_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "kv/allocation_policy.h"
#include "kv/kv_layout.h"
#include "kv/kv_policy.h"
#include "kv/kv_storage.h"
#include "kv/kv_types.h"
#include "kv/page_pool.h"
#include "kv/pool_stats.h"
#include "kv/sequence_table.h"

namespace kvault {

struct KvCacheOptions {
  uint32_t num_pages = 0;
  uint32_t page_size = 16;
  KvPolicy policy = KvPolicy::kPaged;
  // nullopt: bookkeeping only (placement benchmarks need no tensor data).
  std::optional<KvLayout> layout;
};

struct DefragReport {
  uint64_t num_moves = 0;
  uint64_t cells_moved = 0;
  uint64_t lower_bound_cells = 0;
  uint32_t num_sequences_left_fragmented = 0;
  double elapsed_ms = 0;
};

struct KvCacheCounters {
  uint64_t defrag_runs = 0;
  uint64_t cells_moved = 0;
};

class KvCache {
 public:
  // Validates `options` and builds an empty cache.
  static StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheOptions& options);

  // Reserves cells for `tokens` at the end of `seq` (creating it), applying
  // any copy-on-write to storage; returns where each token's K/V goes. With
  // contiguous+defrag, a failed placement defragments and retries once.
  // ResourceExhausted when it does not fit; nothing changed then.
  StatusOr<std::vector<CellId>> Append(SeqId seq,
                                       std::span<const TokenPos> tokens);
  // Removes the cells of `seq` whose position is in [p0, p1), compacting.
  Status RemoveRange(SeqId seq, Pos p0, Pos p1);
  // Makes `dst` share `src`'s first `num_cells` cells (copy-on-write; see
  // SequenceTable::CopySequence).
  Status CopySequence(SeqId src, SeqId dst, uint64_t num_cells = UINT64_MAX);
  // Moves `from`'s cells into `dst`, dropping dst's old cells.
  Status ReplaceSequence(SeqId dst, SeqId from);
  // Moves `from`'s cells onto the end of `dst` (SequenceTable::
  // AppendSequence).
  Status AppendSequence(SeqId dst, SeqId from);
  // Drops one sequence / all but one / everything.
  void RemoveSequence(SeqId seq);
  void KeepOnly(SeqId seq);
  void Clear();
  // Adds `delta` to positions in [p0, p1) of `seq` (metadata only).
  void ShiftPositions(SeqId seq, Pos p0, Pos p1, Pos delta);
  // Compacts every sequence and gathers free space into one run at the end.
  DefragReport Defrag();

  // Returns occupancy statistics (O(num_pages)).
  PoolStats Stats() const { return ComputeStats(pool_, *table_); }
  const SequenceTable& table() const { return *table_; }
  const PagePool& pool() const { return pool_; }
  // Returns the storage, or null for a bookkeeping-only cache.
  KvStorage* storage() { return storage_ ? &*storage_ : nullptr; }
  // Const version of storage().
  const KvStorage* storage() const { return storage_ ? &*storage_ : nullptr; }
  const KvCacheCounters& counters() const { return counters_; }
  // Returns the placement policy the cache was created with.
  KvPolicy kv_policy() const { return kv_policy_; }
  // Returns true when an Append may move other sequences' cells (it
  // defragments when a placement fails, under contiguous+defrag): nothing
  // may hold cell ids across one, and free pages are room enough.
  bool MayMoveCellsOnAppend() const {
    return kv_policy_ == KvPolicy::kContiguousDefrag;
  }

 private:
  KvCache(PagePool pool, std::unique_ptr<AllocationPolicy> policy,
          std::optional<KvStorage> storage, KvPolicy kv_policy);
  void ApplyMoves(const CellMoves& moves);

  PagePool pool_;
  std::unique_ptr<AllocationPolicy> policy_;
  std::unique_ptr<SequenceTable> table_;  // points into pool_ and policy_
  std::optional<KvStorage> storage_;
  KvPolicy kv_policy_;
  KvCacheCounters counters_;
};

}  // namespace kvault

#endif  // KVAULT_KV_KV_CACHE_H_
