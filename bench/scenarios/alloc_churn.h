// The seed request's workload without a model: slots restore saved sessions
// (allocate their length), generate a little, save and free. Measures how
// often a restore fails under each allocation policy.
#ifndef KVAULT_BENCH_SCENARIOS_ALLOC_CHURN_H_
#define KVAULT_BENCH_SCENARIOS_ALLOC_CHURN_H_

#include <cstdint>
#include <string>

#include "core/status_or.h"

namespace kvault::bench {

struct AllocChurnOptions {
  // paged | contiguous | contiguous+defrag | contiguous+shrink
  std::string policy = "paged";
  uint64_t num_cells = 65536;
  uint32_t page_size = 1;
  uint32_t num_slots = 8;
  uint32_t num_sessions = 64;
  uint64_t num_steps = 100000;
  uint64_t seed = 1;
};

struct AllocChurnResult {
  std::string policy;
  uint32_t page_size = 0;
  uint64_t restores = 0;          // restore attempts
  uint64_t restore_failures = 0;  // attempts that found no room
  uint64_t growth_failures = 0;   // generated tokens that found no room
  double success_rate = 0;        // 1 - failures / restores
  double slot_usage = 0;          // mean busy slots / num_slots
  double mean_utilization = 0;    // mean used cells / num_cells
  uint64_t defrag_runs = 0;
  uint64_t cells_moved = 0;
  double alloc_ns_p50 = 0;
  double alloc_ns_p99 = 0;
  uint32_t final_slot_limit = 0;  // slots still in use at the end (shrink)
};

// Validates `options` and runs the simulation; deterministic for a seed
// (apart from the timing fields).
StatusOr<AllocChurnResult> RunAllocChurn(const AllocChurnOptions& options);

// Returns the result as one JSON object with exactly the documented keys.
std::string AllocChurnJson(const AllocChurnResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_ALLOC_CHURN_H_
