// Scenario 4 of docs/benchmarks.md: what a full defragmentation of a KV pool
// costs. A KvCache (no model) of a given size is filled completely with
// equal sequences, a fraction of them is removed so that PoolStats'
// fragmentation is close to a target (one large free run in the middle and
// single-sequence holes spread evenly over the rest), and KvCache::Defrag()
// compacts it. The figure of merit is the time next to a memcpy of the same
// bytes, measured in the same run.
#ifndef KVAULT_BENCH_SCENARIOS_DEFRAG_COST_H_
#define KVAULT_BENCH_SCENARIOS_DEFRAG_COST_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/kv_layout.h"

namespace kvault::bench {

// How to build one fragmented pool.
struct FragmentedPoolSpec {
  uint64_t pool_bytes = uint64_t{64} << 20;  // rounded down to whole sequences
  // Defaults: TinyLlama-1.1B's KV shape (22 layers x 4 heads x 64, F16).
  KvLayout layout{22, 4, 64, 64, KvDtype::kF16};
  uint32_t page_size = 16;
  uint32_t seq_pages = 4;        // pages per sequence (all full)
  double free_fraction = 0.25;   // of the pool's sequences removed
  double target_fragmentation = 0.5;  // in [0, 1)
};

// A filled and fragmented cache; every cell's K and V rows hold a byte
// pattern derived from (sequence, index, layer) that VerifyPatterns checks.
struct FragmentedPool {
  std::unique_ptr<KvCache> cache;
  uint32_t num_sequences = 0;  // filled; some of them removed
  uint32_t num_removed = 0;
};

// Builds the pool of `spec`. InvalidArgument when the pool holds fewer than
// 4 sequences or the target needs more holes than fit without touching.
StatusOr<FragmentedPool> BuildFragmentedPool(const FragmentedPoolSpec& spec);

// Returns OK when every remaining sequence's rows still hold their pattern;
// otherwise Corruption naming the first bad sequence, index and layer.
Status VerifyPatterns(const KvCache& cache);

struct DefragCostOptions {
  FragmentedPoolSpec spec;
  bool verify = true;  // check the patterns after the defrag
};

struct DefragCostResult {
  uint64_t pool_bytes = 0;  // storage actually allocated
  std::string layout;       // KvLayout::ToString()
  uint32_t page_size = 0;
  uint32_t num_sequences = 0;
  double free_fraction = 0;  // measured: free cells / all cells
  double target_fragmentation = 0;
  double fragmentation = 0;        // PoolStats before the defrag
  double fragmentation_after = 0;  // PoolStats after (0 when compacted)
  double setup_ms = 0;
  double defrag_ms = 0;  // DefragReport::elapsed_ms (plan + moves + remap)
  uint64_t num_moves = 0;
  uint64_t cells_moved = 0;
  uint64_t bytes_moved = 0;
  double defrag_gbps = 0;  // bytes_moved / defrag time
  double memcpy_ms = 0;    // memcpy of bytes_moved (best of 3, uncached)
  double memcpy_gbps = 0;
  bool verified = false;  // patterns checked and intact
};

// Builds the pool, defragments it once and measures memcpy of the same bytes.
StatusOr<DefragCostResult> RunDefragCost(const DefragCostOptions& options);

// Returns one JSON object with the fields of DefragCostResult (snake_case
// keys as the member names, plus pool_mib).
std::string DefragCostJson(const DefragCostResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_DEFRAG_COST_H_
