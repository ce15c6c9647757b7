// Slot: one conversation seat of the engine. SeqId == slot index. A slot
// remembers the tokens whose KV it holds (resident in the pool or spilled
// to a tier) and, while a request runs, the request's sampler, streaming
// detokenizer, stop matcher and partial result. Owned and touched only by
// the scheduler thread.
//
// A slot's state is stored, never derived: every change goes through
// SchedulerState::SetState, which checks it against the transitions below.
//
//   idle <-> spilled                (the vault evicts / brings back its KV)
//   idle | spilled -> prefilling    (a request is admitted)
//   prefilling -> generating        (the prompt's last logits were used)
//   prefilling | generating -> preempted -> prefilling | generating
//   prefilling | generating | preempted -> idle | spilled (request ends)
//   idle | spilled -> io -> idle | spilled  (a save, restore or erase)
#ifndef KVAULT_ENGINE_SLOT_H_
#define KVAULT_ENGINE_SLOT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

namespace kvault {

using EngineClock = std::chrono::steady_clock;

// Returns milliseconds from `start` to `end`.
double MsBetween(EngineClock::time_point start, EngineClock::time_point end);

// A running completion.
struct Request {
  Request(uint64_t task_id, CompletionParams params,
          std::shared_ptr<CompletionSink> sink, const Tokenizer* tokenizer,
          const SamplerContext& sampling);

  uint64_t task_id;
  CompletionParams params;
  std::shared_ptr<CompletionSink> sink;
  uint64_t admit_order = 0;  // larger: younger (preempted first)
  Sampler sampler;
  StreamingDetokenizer detok;
  StopMatcher stop;
  // Tokens whose KV is not in the cache yet, in position order: the prompt
  // still to prefill, or the last sampled token (never decoded when the
  // request ends), or everything again after a preemption dropped the KV.
  std::vector<TokenId> to_feed;
  bool prompt_done = false;  // the prompt's last logits were used
  CompletionResult result;   // filled as tokens come
  EngineClock::time_point start;
  EngineClock::time_point prompt_end;
};

enum class SlotState {
  kIdle,        // no request; its KV (if any) is resident
  kSpilled,     // no request; its KV is in a spill tier
  kPrefilling,  // a request evaluates its prompt
  kGenerating,  // a request samples tokens
  kPreempted,   // a request waits for room, out of batches
  kIo,          // a slot action (save, restore, erase) holds it
};

// Returns "idle", "spilled", "prefilling", "generating", "preempted", "io".
const char* SlotStateName(SlotState state);
// Returns whether a slot may go from `from` to `to` (the diagram above).
bool IsValidTransition(SlotState from, SlotState to);

struct Slot {
  explicit Slot(uint32_t index) : id(index), seq(index) {}

  // Returns true when a request or a slot action holds the slot.
  bool busy() const {
    return state != SlotState::kIdle && state != SlotState::kSpilled;
  }
  // Returns true when a request runs and takes part in batches.
  bool in_batch() const {
    return state == SlotState::kPrefilling || state == SlotState::kGenerating;
  }

  uint32_t id;
  SeqId seq;
  SlotState state = SlotState::kIdle;  // changed by SchedulerState::SetState
  // Tokens whose KV the slot holds (resident or spilled), position i at
  // index i: exactly the sequence's cells.
  std::vector<TokenId> cached;
  std::unique_ptr<Request> request;  // set exactly while a request runs
  uint64_t last_use = 0;  // scheduler clock, for choosing an idle slot
  // Tokens of KV the on-kv-full drop-lru policy last dropped from this
  // slot; shown in /slots while the slot holds no KV.
  uint64_t kv_dropped = 0;
  // Of the running or last request, for /slots.
  std::optional<SamplingParams> last_params;
  int32_t last_n_predict = -1;
  uint64_t last_n_decoded = 0;
  std::optional<uint64_t> last_task;
};

// Returns the number of leading tokens `a` and `b` share.
size_t CommonPrefix(const std::vector<TokenId>& a,
                    const std::vector<TokenId>& b);

// Returns the state GET /slots shows for `slot`, from its SlotState alone:
// "idle", "spilled" (also an idle slot whose KV the vault holds in a tier:
// `spilled`), "prefill", "generating", "preempted" or "io".
const char* SlotDisplayState(const Slot& slot, bool spilled);

}  // namespace kvault

#endif  // KVAULT_ENGINE_SLOT_H_
