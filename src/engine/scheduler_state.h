// SchedulerState: the bookkeeping the scheduler's parts share on the
// scheduler thread: the slots, the counters, the replies waiting for the
// next publish and the LRU clock. Slot states change only here (SetState),
// and slot-action outcomes are counted only here (RecordJob).
#ifndef KVAULT_ENGINE_SCHEDULER_STATE_H_
#define KVAULT_ENGINE_SCHEDULER_STATE_H_

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler_ports.h"
#include "engine/slot.h"
#include "engine/slot_job.h"

namespace kvault {

struct SchedulerState {
  // Builds `num_slots` idle slots.
  explicit SchedulerState(uint32_t num_slots);

  // Moves `slot` to `to`; a transition the diagram in slot.h does not
  // allow is a bug (KV_CHECK).
  void SetState(Slot& slot, SlotState to);
  // Moves a slot that nothing holds any more to idle or spilled, as its KV
  // lies now.
  void SetAtRest(Slot& slot, const SlotKv& kv);
  // Re-reads where the KV of every slot at rest lies (the vault evicts
  // idle sequences for room on its own).
  void SyncAtRest(const SlotKv& kv);
  // Counts a finished slot action's outcome.
  void RecordJob(JobKind kind, const Status& outcome);
  // Returns the next LRU clock value.
  uint64_t Tick() { return ++clock; }

  std::vector<Slot> slots;
  EngineMetrics counters;  // pool and vault filled in snapshots
  Deliveries deliveries;   // run by the engine after it publishes
  uint64_t clock = 0;
  // A slot came to rest or a preempted request resumed since the last
  // admission: queued work may start now (set by SetState).
  bool may_admit = false;
};

// Returns the status a cancelled request or action ends with.
Status CancelledStatus(const std::string& what);

}  // namespace kvault

#endif  // KVAULT_ENGINE_SCHEDULER_STATE_H_
