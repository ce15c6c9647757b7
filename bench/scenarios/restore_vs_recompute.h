// Scenario 2 of docs/benchmarks.md: time to first token when a conversation
// of L cached tokens continues, either by restoring its state file into a
// fresh cache and decoding the new token, or by prefilling the L history
// tokens plus the new one again (chunks of `chunk` tokens, logits for the
// last). The state file is written once per length (no fsync, so it is read
// from the page cache: the best case for restore, as for a recently saved
// slot).
#ifndef KVAULT_BENCH_SCENARIOS_RESTORE_VS_RECOMPUTE_H_
#define KVAULT_BENCH_SCENARIOS_RESTORE_VS_RECOMPUTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_dtype.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct RestoreVsRecomputeOptions {
  std::string model_path;  // empty: the generated small model
  std::vector<uint32_t> lengths = {128, 256, 512, 1024, 2048, 4096};
  uint32_t threads = 2;  // compute threads, the caller included
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  uint32_t reps = 3;     // medians of this many timed runs after a warm-up
  uint32_t chunk = 512;  // prefill tokens per Decode call
  uint32_t page_size = 16;
  KvDtype cache_type = KvDtype::kF16;
  std::string dir;  // for the state files; empty: a fresh one under /tmp
  uint64_t seed = 1;
};

struct RestoreVsRecomputeRow {
  uint32_t num_tokens = 0;   // the conversation's length L
  uint64_t file_bytes = 0;   // its state file
  double restore_ttft_ms = 0;    // restore + one decode step (median)
  double restore_io_ms = 0;      // of which RestoreSequenceFromFile
  double recompute_ttft_ms = 0;  // prefill of L + 1 tokens (median)
  double speedup = 0;            // recompute / restore
};

struct RestoreVsRecomputeResult {
  std::string model;  // the path or "small (generated)"
  uint32_t threads = 0;
  uint32_t reps = 0;
  std::vector<RestoreVsRecomputeRow> rows;  // in `lengths` order
};

// Validates `options`, runs the measurements and removes its files.
StatusOr<RestoreVsRecomputeResult> RunRestoreVsRecompute(
    const RestoreVsRecomputeOptions& options);

// Returns one JSON object per row (model, threads, reps, n_tokens,
// file_bytes, restore_ttft_ms, restore_io_ms, recompute_ttft_ms, speedup),
// one line each.
std::string RestoreVsRecomputeJson(const RestoreVsRecomputeResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_RESTORE_VS_RECOMPUTE_H_
