// Scenario 3 of docs/benchmarks.md: generation throughput with a cached
// context of D tokens whose KV pages are contiguous in the pool, against
// the same with every other page held by another sequence (ModelBench's
// `fragmented`; the pool hands the free ones out lowest first), for several
// page sizes. Each point averages `rounds` RunModelBench runs per layout (tg
// only, after D cached tokens), interleaved A B B A.
#ifndef KVAULT_BENCH_SCENARIOS_DECODE_FRAGMENTATION_H_
#define KVAULT_BENCH_SCENARIOS_DECODE_FRAGMENTATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/scenarios/model_bench.h"
#include "core/status.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct DecodeFragmentationOptions {
  std::string model_path;  // required
  std::vector<uint32_t> depths = {512, 1024, 2048, 4096};
  std::vector<uint32_t> page_sizes = {1, 16, 256};
  uint32_t num_gen = 32;  // tg steps per run
  uint32_t threads = 2;
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  uint32_t reps = 3;     // RunModelBench's reps per measurement
  uint32_t rounds = 2;   // measurements per layout, A B B A; tok/s averaged
  uint64_t seed = 1;
};

struct DecodeFragmentationRow {
  uint32_t page_size = 0;
  uint32_t depth = 0;
  double contiguous_tok_s = 0;
  double contiguous_std = 0;  // RMS of the runs' sample stddevs
  double fragmented_tok_s = 0;
  double fragmented_std = 0;
  // 1 - fragmented / contiguous, in percent (negative: fragmented faster).
  double slowdown_pct = 0;
};

// Runs every (page size, depth) pair both ways, calling `on_row` after each
// pair (so long runs stream their results); stops at the first error.
Status RunDecodeFragmentation(
    const DecodeFragmentationOptions& options,
    const std::function<void(const DecodeFragmentationRow&)>& on_row);

// Returns one JSON object: model, n_gen, threads, reps, rounds, page_size,
// depth,
// contiguous_tok_s, contiguous_std, fragmented_tok_s, fragmented_std,
// slowdown_pct.
std::string DecodeFragmentationJson(const DecodeFragmentationOptions& options,
                                    const DecodeFragmentationRow& row);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_DECODE_FRAGMENTATION_H_
