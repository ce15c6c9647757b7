// Scenario 7 of docs/benchmarks.md: time to first token when a conversation
// of L tokens continues, by where its KV comes from: recomputed (prefill
// L + 1 tokens), still in the pool (one decode step), the RAM tier (its
// state bytes restored from memory), the prefix store's disk tier as a
// restarted instance finds it (a store opened on the directory, pages
// loaded, the rest prefilled), and the shared Redis tier as another
// instance finds it. Also the Redis tier's write and read throughput over
// the same page records. The disk records are read from the page cache.
#ifndef KVAULT_BENCH_SCENARIOS_PREFIX_TIERS_H_
#define KVAULT_BENCH_SCENARIOS_PREFIX_TIERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_dtype.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct PrefixTiersOptions {
  std::string model_path;  // empty: the generated small model
  uint32_t length = 4096;  // the conversation's tokens
  uint32_t threads = 2;
  ComputeBackendOptions compute;
  uint32_t reps = 3;  // medians of this many runs after a warm-up
  uint32_t chunk = 512;
  uint32_t page_size = 16;
  KvDtype cache_type = KvDtype::kF16;
  std::string redis_url;  // empty: no Redis rows
  std::string dir;        // for the disk tier; empty: a fresh one in /tmp
  uint64_t seed = 1;
};

struct PrefixTiersRow {
  std::string source;          // recompute, pool, ram, disk, redis
  double ttft_ms = 0;          // median
  double speedup = 0;          // recompute / this
  uint64_t cached_tokens = 0;  // tokens not evaluated
};

struct PrefixTiersResult {
  std::string model;
  uint32_t threads = 0;
  uint32_t reps = 0;
  uint32_t num_tokens = 0;
  uint64_t record_bytes = 0;  // one page record
  uint64_t num_records = 0;
  std::vector<PrefixTiersRow> rows;
  double redis_write_gbps = 0;  // queued Puts until flushed
  double redis_read_gbps = 0;   // Gets, one at a time, 4 passes in chain order
};

// Validates `options`, runs the measurements and removes its files.
StatusOr<PrefixTiersResult> RunPrefixTiers(const PrefixTiersOptions& options);

// Returns one JSON object per row, then one for the throughput, one line
// each.
std::string PrefixTiersJson(const PrefixTiersResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_PREFIX_TIERS_H_
