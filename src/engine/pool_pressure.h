// PoolPressure: the rungs of the scheduler's room ladder that involve
// slots — spilling (or, under --on-kv-full drop-lru, dropping) an idle
// slot's KV, preempting the youngest running request, bringing a
// preempted request back — and the error of a request that cannot get
// room. Plain eviction of idle sequences is the vault's (SlotKv::MakeRoom).
#ifndef KVAULT_ENGINE_POOL_PRESSURE_H_
#define KVAULT_ENGINE_POOL_PRESSURE_H_

#include <cstdint>

#include "engine/generation.h"
#include "engine/scheduler_ports.h"
#include "engine/scheduler_state.h"

namespace kvault {

class PoolPressure {
 public:
  // None owned; all must outlive this.
  PoolPressure(OnKvFull on_kv_full, SchedulerState* state, SlotKv* kv,
               Generation* generation);

  // Spills an idle resident slot (least recently used first); when no tier
  // takes any, drops the LRU one's KV under drop-lru. False when nothing
  // was freed.
  bool FreeOneIdleSlot();
  // Preempts the youngest request in batches; false when at most one runs.
  bool PreemptYoungest();
  // Brings the preempted slot's KV back (or schedules a recompute) and
  // puts its request back in batches; false when there is no room yet.
  bool Resume(Slot& slot);
  // The error of a request that cannot get `need_pages`: reason kv_full
  // when idle slots' KV was kept by on-kv-full refuse, else no_room.
  Status PoolFullError(const Slot& slot, uint64_t need_pages);
  // Returns the pages idle slots hold (what evicting them all would free).
  uint64_t IdlePages() const;

 private:
  // Drops `victim`'s idle KV (drop-lru), counted and marked on the slot.
  void DropIdleKv(Slot& victim, const Status& why);
  // Takes the slot's request out of batches and spills (or drops) its KV.
  void Preempt(Slot& slot);
  // Forgets the slot's KV; its request re-prefills the tokens.
  void DropKv(Slot& slot, const char* why);

  OnKvFull on_kv_full_;
  SchedulerState* state_;
  SlotKv* kv_;
  Generation* generation_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_POOL_PRESSURE_H_
