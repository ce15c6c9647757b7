// Scheduler: the engine's policy, single-threaded, in the style of
// nano-vllm's. Work waits in a FIFO queue (per slot); a completion is
// admitted into the idle slot sharing the longest prefix with its prompt;
// each step decodes one token for every generating slot and then feeds
// prompt chunks, oldest request first, within the batch budget (paced
// beside decoding). Room in the pool comes from one ladder: free pages,
// the vault evicting idle sequences, spilling or dropping an idle slot,
// preempting the youngest request; preempted requests resume oldest first
// before anything new is admitted. Slot actions run as jobs (JobRunner).
//
// It sees the model and the KV only through ForwardPass and SlotKv, and
// no threads: the engine feeds it work and I/O completions and publishes
// what it reports.
#ifndef KVAULT_ENGINE_SCHEDULER_H_
#define KVAULT_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

#include "engine/generation.h"
#include "engine/job_runner.h"
#include "engine/pool_pressure.h"
#include "engine/prefill_pacer.h"
#include "engine/prefix_reuse.h"
#include "engine/scheduler_ports.h"
#include "engine/scheduler_state.h"
#include "engine/work.h"

namespace kvault {

struct SchedulerOptions {
  uint32_t n_slots = 1;
  uint32_t max_batch_tokens = 512;
  uint32_t prefill_chunk = 512;
  OnKvFull on_kv_full = OnKvFull::kDropLru;
  // A request may take the prompt prefix another slot holds (whole pages,
  // shared copy-on-write); false: only its own slot's cache.
  bool prefix_cache = true;
  // When a request starts, every other idle slot's resident KV moves to
  // the spill tiers (llama-server's --cache-idle-slots with a unified
  // cache), so the running slots have the pool to themselves; it comes
  // back when its conversation does. Off: idle KV stays until room is
  // needed (the paged pool's default).
  bool cache_idle_slots = false;
  GenerationOptions generation;
  JobRunnerOptions jobs;
  PrefillPacer pacer{0, 1};
};

class Scheduler {
 public:
  // None owned; all must outlive this.
  Scheduler(const SchedulerOptions& options, SlotKv* kv, ForwardPass* forward,
            const Tokenizer* tokenizer, const SamplerVocab* vocab);

  // Queues `work` behind what is queued.
  void Enqueue(Work work);
  // Ends the queued and running completions with these ids (Cancelled).
  void Cancel(const std::set<uint64_t>& task_ids);
  // Starts the queued work that can start now, in queue order; returns
  // whether a slot action ran (its caller may read statistics at once).
  bool Admit();
  // Resumes preempted requests that fit, then builds, makes room for,
  // decodes and samples one batch.
  void Step();
  // Returns true when Step has work without new input.
  bool HasRunnableWork() const;
  // Returns true when Admit or Step has work without new input.
  bool HasWork() const;
  // Ends every queued item and running request with Cancelled (no I/O in
  // flight).
  void CancelAll();
  // At start-up: the slot holds `tokens`' KV (recovered from the disk tier).
  void AdoptRecovered(uint32_t slot, std::vector<TokenId> tokens);

  // Slot-action I/O, for the engine's I/O threads.
  JobRunner& jobs() { return jobs_; }
  const JobRunner& jobs() const { return jobs_; }
  // What the engine publishes and delivers.
  SchedulerState& state() { return state_; }
  const SchedulerState& state() const { return state_; }
  // Returns the queued completions (deferred requests).
  uint64_t NumQueuedCompletions() const;

 private:
  // A batch entry: `num_tokens` of the slot's to_feed.
  struct Part {
    Slot* slot = nullptr;
    size_t num_tokens = 0;
    bool want_logits = false;
  };

  // Takes the queued items that can start now, in queue order.
  std::vector<Work> TakeRunnable();
  // Returns the idle slot (not in `blocked`) sharing the longest prefix
  // with the prompt, else the least recently used; nullopt when none.
  std::optional<uint32_t> ChooseSlot(const CompletionParams& params,
                                     const std::set<uint32_t>& blocked) const;
  // Makes the slot run `work`'s completion.
  void StartRequest(Slot& slot, CompletionWork work);
  // Spills every idle slot but `running` that holds resident KV
  // (SchedulerOptions::cache_idle_slots); a slot no tier takes stays.
  void SpillIdleSlots(const Slot& running);
  // True when the slot's spilled KV, which the prompt would reuse, cannot
  // come back now but a running request will leave room when it ends.
  bool MustWaitForRoom(const Slot& slot, const CompletionParams& params);
  // Resumes preempted requests, oldest first, while the step has room.
  void ResumePreempted();
  // Returns this step's batch: one decode token per generating slot, then
  // prompt chunks, oldest request first, within max_batch_tokens.
  std::vector<Part> PlanBatch();
  // Makes room for `*plan` down the ladder; may shrink the plan. False
  // when even preempting fails (the front request failed, plan empty).
  bool MakeRoomForPlan(std::vector<Part>* plan);
  // Returns the free pages `plan` takes.
  uint64_t PagesNeeded(const std::vector<Part>& plan) const;
  // Decodes `plan`: true when done (or failed for good), false when the
  // pool could not place it and room was made for a new plan.
  bool Decode(const std::vector<Part>& plan);
  // Moves the decoded tokens into the slots' caches, then samples.
  void ApplyDecoded(const std::vector<Part>& plan,
                    const std::vector<float>& logits);

  SchedulerOptions options_;
  SlotKv* kv_;
  ForwardPass* forward_;
  SchedulerState state_;
  Generation generation_;
  PoolPressure pressure_;
  PrefixReuse prefix_reuse_;
  JobRunner jobs_;
  PrefillPacer pacer_;  // prompt tokens per step beside decoding
  std::deque<Work> queue_;
  uint64_t admit_counter_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_SCHEDULER_H_
