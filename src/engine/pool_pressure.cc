#include "engine/pool_pressure.h"

#include <algorithm>
#include <vector>

#include "core/log.h"

namespace kvault {

PoolPressure::PoolPressure(OnKvFull on_kv_full, SchedulerState* state,
                           SlotKv* kv, Generation* generation)
    : on_kv_full_(on_kv_full),
      state_(state),
      kv_(kv),
      generation_(generation) {}

bool PoolPressure::FreeOneIdleSlot() {
  std::vector<Slot*> idle;  // resident, not busy; least recently used first
  for (Slot& slot : state_->slots) {
    if (!slot.busy() && kv_->ResidentLength(slot.seq) > 0) {
      idle.push_back(&slot);
    }
  }
  std::sort(idle.begin(), idle.end(),
            [](Slot* a, Slot* b) { return a->last_use < b->last_use; });
  Status first_error;
  for (Slot* slot : idle) {
    StatusOr<Eviction> evicted = kv_->Evict(slot->seq);
    if (evicted.ok()) {
      state_->SetState(*slot, SlotState::kSpilled);
      return true;
    }
    if (first_error.ok()) first_error = evicted.status();
  }
  if (idle.empty() || on_kv_full_ == OnKvFull::kRefuse) return false;
  DropIdleKv(*idle.front(), first_error);
  return true;
}

void PoolPressure::DropIdleKv(Slot& victim, const Status& why) {
  const uint64_t num_tokens = victim.cached.size();
  KV_LOG(WARNING) << "slot " << victim.id << ": dropped the idle KV of "
                  << num_tokens << " tokens for room (--on-kv-full drop-lru); "
                  << "no spill tier can take it: " << why;
  ++state_->counters.idle_kv_discards;
  state_->counters.idle_kv_discarded_tokens += num_tokens;
  Status erased = kv_->Erase(victim.seq);
  if (!erased.ok()) KV_LOG(WARNING) << erased;
  victim.cached.clear();
  victim.kv_dropped = num_tokens;
  state_->SetAtRest(victim, *kv_);
}

uint64_t PoolPressure::IdlePages() const {
  uint64_t pages = 0;
  for (const Slot& s : state_->slots) {
    if (!s.busy()) pages += kv_->PagesHeld(s.seq);
  }
  return pages;
}

Status PoolPressure::PoolFullError(const Slot& slot, uint64_t need_pages) {
  const uint64_t idle_pages = IdlePages();
  std::string msg = "slot " + std::to_string(slot.id) + " needs " +
                    std::to_string(need_pages) + " more pages; the pool has " +
                    std::to_string(kv_->num_free_pages()) + " free";
  if (idle_pages == 0) return ResourceExhaustedError(msg).WithReason(kReasonNoRoom);
  ++state_->counters.kv_full_refusals;
  return ResourceExhaustedError(
             msg + " and idle slots hold " + std::to_string(idle_pages) +
             " pages that no spill tier can take; --on-kv-full refuse keeps "
             "their KV (drop-lru would drop it)")
      .WithReason(kReasonKvFull);
}

bool PoolPressure::PreemptYoungest() {
  Slot* youngest = nullptr;
  int num_in_batch = 0;
  for (Slot& slot : state_->slots) {
    if (!slot.in_batch()) continue;
    ++num_in_batch;
    if (youngest == nullptr ||
        slot.request->admit_order > youngest->request->admit_order) {
      youngest = &slot;
    }
  }
  if (num_in_batch <= 1) return false;
  Preempt(*youngest);
  return true;
}

void PoolPressure::Preempt(Slot& slot) {
  state_->SetState(slot, SlotState::kPreempted);
  kv_->SetActive(slot.seq, false);
  ++state_->counters.preemptions;
  if (kv_->ResidentLength(slot.seq) == 0) return;
  StatusOr<Eviction> evicted = kv_->Evict(slot.seq);
  if (evicted.ok()) {
    KV_LOG(INFO) << "slot " << slot.id << ": preempted task "
                 << slot.request->task_id << ", " << evicted->num_tokens
                 << " tokens spilled to " << evicted->tier;
    return;
  }
  KV_LOG(WARNING) << "slot " << slot.id << ": preempted task "
                  << slot.request->task_id << " cannot be spilled ("
                  << evicted.status() << "); its " << slot.cached.size()
                  << " tokens will be recomputed";
  ++state_->counters.preemptions_recomputed;
  DropKv(slot, "preempted");
}

void PoolPressure::DropKv(Slot& slot, const char* why) {
  if (slot.request != nullptr) {
    std::vector<TokenId>& feed = slot.request->to_feed;
    feed.insert(feed.begin(), slot.cached.begin(), slot.cached.end());
  }
  Status erased = kv_->Erase(slot.seq);
  if (!erased.ok()) {
    KV_LOG(WARNING) << "slot " << slot.id << " (" << why << "): " << erased;
  }
  slot.cached.clear();
}

bool PoolPressure::Resume(Slot& slot) {
  while (kv_->IsSpilled(slot.seq)) {
    Status back = kv_->BringBack(slot.seq);
    if (back.ok()) break;
    if (back.IsResourceExhausted()) {
      if (FreeOneIdleSlot()) continue;
      return false;
    }
    KV_LOG(WARNING) << "slot " << slot.id << ": bringing back its KV failed, "
                    << "recomputing " << slot.cached.size()
                    << " tokens: " << back;
    DropKv(slot, "bring-back failed");
  }
  if (!slot.cached.empty() && kv_->ResidentLength(slot.seq) == 0) {
    // A full last tier dropped the spilled copy (logged by the vault).
    DropKv(slot, "spilled copy dropped");
  }
  state_->SetState(slot, slot.request->prompt_done ? SlotState::kGenerating
                                                   : SlotState::kPrefilling);
  kv_->SetActive(slot.seq, true);
  kv_->Touch(slot.seq);
  return true;
}

}  // namespace kvault
