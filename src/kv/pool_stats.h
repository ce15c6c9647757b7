// PoolStats: how full and how fragmented the KV pool is, for metrics,
// benchmarks and the defragmentation trigger.
#ifndef KVAULT_KV_POOL_STATS_H_
#define KVAULT_KV_POOL_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "kv/page_pool.h"
#include "kv/sequence_table.h"

namespace kvault {

struct SequenceStats {
  SeqId seq;
  uint64_t num_cells = 0;         // tokens the sequence holds
  uint32_t num_pages = 0;         // pages it lists
  uint32_t num_shared_pages = 0;  // of those, pages with refcount > 1
  friend bool operator==(const SequenceStats&, const SequenceStats&) = default;
};

struct PoolStats {
  uint64_t num_cells = 0;        // all cells of the pool
  uint64_t used_cells = 0;       // distinct cells holding a token
  uint64_t allocated_cells = 0;  // cells in non-free pages
  uint64_t free_cells = 0;       // cells in free pages
  uint64_t num_free_runs = 0;    // maximal runs of consecutive free pages
  uint64_t largest_free_run_cells = 0;
  // 1 - largest_free_run_cells / free_cells; 0 when nothing is free.
  double fragmentation = 0.0;
  std::vector<SequenceStats> sequences;  // in SequenceIds() order
};

// Returns the statistics of `pool` as filled by `table` (which must allocate
// from `pool`). O(num_pages / 64 + free runs + sequences' pages).
PoolStats ComputeStats(const PagePool& pool, const SequenceTable& table);

// Returns a one-line summary, e.g. "cells 1024 used 300 allocated 320 free
// 704 runs 3 largest_run 512 frag 0.273".
std::string FormatPoolStats(const PoolStats& stats);

}  // namespace kvault

#endif  // KVAULT_KV_POOL_STATS_H_
