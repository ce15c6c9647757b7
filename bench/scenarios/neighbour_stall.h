// Neighbour stall: how much a slot restore slows the other slots down.
//
// `num_generating` slots generate (greedy, ignore EOS) in one engine while a
// further slot restores a state file of about `restore_mb` MiB. The file is
// built beforehand straight through the kv layer (random K/V bytes, the
// model's layout and fingerprint), so building it costs no forward passes.
// Every generated token's arrival time is recorded; the inter-token latency
// (ITL) of each generating slot is reported before, during and after the
// restore. The engine runs the restore's file I/O on its I/O thread, so the
// ITL during the restore should stay within about one decode step of the
// baseline.
//
// With `prefill_tokens` > 0 the further slot prefills a prompt of that many
// tokens instead (and generates one token): the engine feeds it in chunks
// sized so the generating slots' ITL stays near (1 + prefill_step_share) x
// its idle value; the generating slots run until the prompt is done and
// 100 tokens more (their ITL after it, at the depth they reached, is the
// fairer baseline for a long prompt).
#ifndef KVAULT_BENCH_SCENARIOS_NEIGHBOUR_STALL_H_
#define KVAULT_BENCH_SCENARIOS_NEIGHBOUR_STALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status_or.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct NeighbourStallOptions {
  std::string model_path;       // empty: a generated small model
  uint32_t num_generating = 4;  // slots generating during the restore
  uint32_t num_gen = 256;       // tokens each generating slot produces
  double restore_mb = 100;      // size of the restored state file
  uint32_t restore_after = 32;  // tokens per slot before the restore starts
  uint32_t threads = 2;
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  std::string dir;  // where the state file goes; empty: a temp dir
  uint32_t prefill_tokens = 0;  // > 0: prefill this prompt, no restore
  double prefill_step_share = -1;  // < 0: the engine's default
};

// One generated token: when it arrived, relative to the first token.
struct TokenArrival {
  uint32_t slot = 0;
  double ms = 0;
};

struct NeighbourStallResult {
  uint64_t restore_tokens = 0;
  uint64_t restore_bytes = 0;
  double restore_ms = 0;        // RestoreSlot's (or the prompt's) wall time
  double restore_begin_ms = 0;  // on the arrival clock
  double restore_end_ms = 0;
  double itl_median_before_ms = 0;  // baseline decode step
  double itl_max_before_ms = 0;
  double itl_median_during_ms = 0;
  double itl_max_during_ms = 0;   // the stall the neighbours saw
  double itl_p99_ms = 0;          // over the whole run
  double itl_p99_before_ms = 0;
  double itl_p99_during_ms = 0;
  // Gaps wholly after the restore or prompt: the generating slots are
  // deeper then, so their steps cost more than before it.
  double itl_median_after_ms = 0;
  double itl_p99_after_ms = 0;
  double itl_max_after_ms = 0;
  // Each during-gap over the idle ITL expected at its time, interpolated
  // linearly between the before and after medians (the slots' depth, hence
  // their step time, grows linearly meanwhile): p50 / p99 / max.
  double ratio_same_depth_p50 = 0;
  double ratio_same_depth_p99 = 0;
  double ratio_same_depth_max = 0;
  std::vector<TokenArrival> arrivals;
};

// Runs the scenario.
StatusOr<NeighbourStallResult> RunNeighbourStall(
    const NeighbourStallOptions& options);

// Returns one JSON object with the figures (arrivals omitted unless
// `with_arrivals`).
std::string NeighbourStallJson(const NeighbourStallResult& result,
                               bool with_arrivals);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_NEIGHBOUR_STALL_H_
