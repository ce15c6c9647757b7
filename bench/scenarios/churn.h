// Scenario 1 of docs/benchmarks.md: the seed request's workload end to end
// on the real engine. S slots serve M saved conversations for T turns. A
// turn takes the next active slot (round robin; up to S turns run at once,
// continuous batching), waits for that slot's previous turn and saves it,
// picks a conversation no slot holds (seeded), erases the slot (the old
// conversation is saved, as llama-server's restore overwrites the slot) and
// restores the picked conversation's slot file into it (its first turn:
// plain prefill), appends a random user message and generates greedily.
// A failed restore (reason "no_room") falls back to re-prefilling the whole
// history, as a user would. Configurations:
//   contiguous         kv_policy contiguous (llama.cpp's allocator)
//   contiguous+shrink  the request's workaround: one slot fewer after every
//                      failed restore (at least one)
//   contiguous+defrag  kv_policy contiguous+defrag; the harness defragments
//                      (Engine::Defrag, timed) before a restore that finds no
//                      free run large enough, and after a failure, retrying
//                      once
//   paged              kv_policy paged
//   paged+spill        paged, pool of num_cells / 2, RAM spill tier: idle
//                      slots are spilled for room; a restore that finds no
//                      room while other turns run waits for them once
#ifndef KVAULT_BENCH_SCENARIOS_CHURN_H_
#define KVAULT_BENCH_SCENARIOS_CHURN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status_or.h"
#include "model/compute_backend.h"
#include "model/llama_model.h"

namespace kvault::bench {

// Returns the five configuration names in their report order.
const std::vector<std::string>& ChurnConfigNames();

struct ChurnOptions {
  std::string model_path;  // empty: the generated small model
  // Makes the model of each configuration's engine; null: LoadModelOrSmall.
  std::function<StatusOr<std::unique_ptr<LlamaModel>>()> make_model;
  std::vector<std::string> configs;  // empty: all five
  uint32_t num_slots = 4;
  uint32_t num_sessions = 12;  // saved conversations (> num_slots)
  uint32_t num_turns = 48;
  uint32_t num_cells = 2048;   // the pool; paged+spill gets half
  uint32_t ctx_per_slot = 512;
  uint32_t page_size = 16;
  uint32_t num_gen = 16;       // generated tokens per turn
  // A new conversation's prompt length is uniform in [min_prompt,
  // max_prompt]; 0: ctx_per_slot / 2 and the longest that leaves room for
  // one turn (ctx_per_slot - max_user - num_gen - 1). Long conversations
  // keep the pool full, as in the request (slots near their context).
  uint32_t min_prompt = 0;
  uint32_t max_prompt = 0;
  uint32_t min_user = 16;  // user message length range per turn
  uint32_t max_user = 48;
  uint32_t threads = 2;    // forward-pass threads
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  // Turns running at once; 0: one per active slot (continuous batching;
  // allocation order then depends on timing). 1 makes a run deterministic.
  uint32_t max_in_flight = 0;
  uint64_t seed = 1;
  std::string dir;  // slot files; empty: a fresh directory under /tmp
};

struct ChurnResult {
  std::string config;
  std::string kv_policy;
  uint32_t num_slots = 0;
  uint32_t num_cells = 0;  // this configuration's pool
  uint32_t num_turns = 0;
  uint64_t restore_attempts = 0;  // turns of an already saved conversation
  uint64_t restore_ok = 0;
  uint64_t restore_waits = 0;  // no room at first; retried after waiting
  double restore_success_rate = 1;  // restore_ok / attempts; 1 if none
  double slot_usage = 0;        // mean active slots / num_slots over turns
  uint32_t final_active_slots = 0;
  double pool_utilization = 0;  // mean used / total cells, once per turn
  double restore_ms_p50 = 0;    // RestoreSlot wall time, successful ones
  double restore_ms_p99 = 0;
  double defrag_ms_total = 0;   // DefragReport::elapsed_ms of Defrag calls
  uint64_t num_defrags = 0;
  uint64_t cells_moved = 0;
  uint64_t recompute_turns = 0;    // failed restores re-prefilled
  uint64_t new_conversations = 0;  // first turns (plain prefill)
  uint64_t failed_turns = 0;       // completions the engine failed
  // Turns whose slot the engine emptied for room before the save.
  uint64_t lost_saves = 0;
  uint64_t generated_tokens = 0;
  double wall_s = 0;     // the turn loop
  double gen_tok_s = 0;  // generated_tokens / wall_s
  double ttft_ms_p50 = 0;  // turn start (erase + restore) to first token
  double ttft_ms_p99 = 0;
  double ttft_restored_ms_p50 = 0;    // turns whose restore succeeded
  double ttft_recomputed_ms_p50 = 0;  // turns re-prefilled after a failure
  uint64_t evictions = 0;      // idle sequences spilled (vault)
  uint64_t spilled_bytes = 0;  // bytes written to the spill tiers
  uint64_t preemptions = 0;
  uint64_t idle_kv_discards = 0;
};

// Returns the [min, max] prompt length of a new conversation, defaults
// resolved (max is 0 when ctx_per_slot cannot hold one turn).
std::pair<uint32_t, uint32_t> ChurnPromptRange(const ChurnOptions& options);

// Runs every requested configuration on a fresh engine with the same seed;
// removes its slot files. InvalidArgument for bad options or an unknown
// configuration name.
StatusOr<std::vector<ChurnResult>> RunChurn(const ChurnOptions& options);

// Runs one configuration `config` (a ChurnConfigNames() entry).
StatusOr<ChurnResult> RunChurnConfig(const ChurnOptions& options,
                                     const std::string& config);

// Returns one JSON object (one line, no newline) with every field; the
// restore and per-kind TTFT percentiles are null when nothing was sampled.
std::string ChurnJson(const ChurnResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_CHURN_H_
