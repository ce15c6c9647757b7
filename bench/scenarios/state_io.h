// Save/restore throughput of one sequence's state file on the real
// filesystem, next to the raw bandwidths that bound it (reading the same
// bytes from the page cache, memcpy), all measured in the same run.
#ifndef KVAULT_BENCH_SCENARIOS_STATE_IO_H_
#define KVAULT_BENCH_SCENARIOS_STATE_IO_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/status_or.h"
#include "kv/kv_layout.h"

namespace kvault::bench {

struct StateIoOptions {
  uint64_t num_tokens = 4096;
  // Defaults: TinyLlama-1.1B's KV shape.
  KvLayout layout{22, 4, 64, 64, KvDtype::kF16};
  uint32_t page_size = 16;
  // Threads each restore reads and verifies its chunks with
  // (RestoreOptions::num_threads).
  uint32_t restore_threads = 2;
  // Only the restore into a fragmented pool (skips the contiguous one).
  bool fragmented_only = false;
  // Each figure is the median of this many timed repetitions (after one
  // untimed warm-up).
  uint32_t reps = 5;
  // Directory for the state file; empty: a fresh directory under /tmp that
  // is removed afterwards. A given directory is created if missing and kept
  // (only the file is removed).
  std::string dir;
  uint64_t seed = 1;
};

// Throughputs in GB/s (1e9 bytes per second) of `bytes` bytes, medians.
struct StateIoResult {
  uint64_t num_tokens = 0;
  std::string layout;  // KvLayout::ToString()
  uint32_t page_size = 0;
  uint32_t restore_threads = 0;
  uint32_t reps = 0;
  uint64_t bytes = 0;          // the state file's size
  double save_gbps = 0;        // SaveSequenceToFile, sync = false
  double save_fsync_gbps = 0;  // SaveSequenceToFile, sync = true
  // Restore into a pool whose free pages are one contiguous run; nullopt
  // with fragmented_only.
  std::optional<double> restore_gbps;
  // Restore into single-page holes between another sequence's pages.
  double restore_fragmented_gbps = 0;
  double read_gbps = 0;    // pread of the cached file into a buffer
  double memcpy_gbps = 0;  // memcpy of `bytes` between touched buffers
};

// Validates `options`, runs the measurements and removes what it wrote.
// Each restore is checked to reproduce the saved bytes.
StatusOr<StateIoResult> RunStateIo(const StateIoOptions& options);

// Returns one JSON object with exactly the keys bytes, restore_threads,
// save_gbps,
// save_fsync_gbps, restore_gbps (null when not measured),
// restore_fragmented_gbps, read_gbps, memcpy_gbps.
std::string StateIoJson(const StateIoResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_STATE_IO_H_
