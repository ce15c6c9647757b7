// Pool pressure: making room for a step's batch (spill idle slots, drop
// the KV of idle slots no tier can take, then preempt the youngest
// request) and resuming preempted requests when room returns.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {

// --- Preempted requests ------------------------------------------------------

void Engine::Impl::ResumePreempted() {
  std::vector<Slot*> waiting;
  for (Slot& slot : slots_) {
    if (slot.request != nullptr && slot.request->preempted) {
      waiting.push_back(&slot);
    }
  }
  std::sort(waiting.begin(), waiting.end(), [](Slot* a, Slot* b) {
    return a->request->admit_order < b->request->admit_order;
  });
  const uint64_t page_size = cache_->pool().page_size();
  for (Slot* slot : waiting) {
    const bool others = std::any_of(slots_.begin(), slots_.end(),
                                    [](const Slot& s) { return s.in_batch(); });
    if (others) {
      // Resume only when this step fits with it: no ping-pong.
      const uint64_t own =
          slot->cached.size() +
          std::min<uint64_t>(slot->request->to_feed.size(),
                             options_.prefill_chunk);
      const uint64_t need =
          PagesNeeded(PlanBatch()) + (own + page_size - 1) / page_size + 1;
      uint64_t available = cache_->pool().num_free_pages();
      for (const Slot& s : slots_) {
        if (!s.busy()) available += cache_->table().Pages(s.seq).size();
      }
      if (available < need) break;  // oldest first: no overtaking
    }
    if (!Resume(*slot)) {
      if (!others) {
        const uint64_t own =
            slot->cached.size() + slot->request->to_feed.size();
        Fail(*slot, PoolFullError(*slot, (own + page_size - 1) / page_size));
      }
      break;
    }
  }
}

bool Engine::Impl::Resume(Slot& slot) {
  while (vault_->IsSpilled(slot.seq)) {
    StatusOr<std::optional<VaultRestoreResult>> back =
        vault_->EnsureResident(slot.seq);
    if (back.ok()) break;
    if (back.status().IsResourceExhausted()) {
      if (FreeOneIdleSlot()) continue;
      return false;
    }
    KV_LOG(WARNING) << "slot " << slot.id << ": bringing back its KV failed, "
                    << "recomputing " << slot.cached.size()
                    << " tokens: " << back.status();
    DropKv(slot, "bring-back failed");
  }
  if (!slot.cached.empty() && !cache_->table().Contains(slot.seq)) {
    // A full last tier dropped the spilled copy (logged by the vault).
    DropKv(slot, "spilled copy dropped");
  }
  slot.request->preempted = false;
  queue_may_progress_ = true;  // admission waits while requests are preempted
  vault_->SetActive(slot.seq, true);
  vault_->Touch(slot.seq);
  return true;
}

// --- Room in the pool ------------------------------------------------------

uint64_t Engine::Impl::PagesToGrow(SeqId seq, uint64_t num_cells) const {
  return cache_->table().PagesToGrow(seq, num_cells);
}

uint64_t Engine::Impl::PagesNeeded(const std::vector<Part>& plan) const {
  uint64_t pages = 0;
  for (const Part& part : plan) {
    pages += PagesToGrow(part.slot->seq, part.num_tokens);
  }
  return pages;
}

bool Engine::Impl::FreeOneIdleSlot() {
  std::vector<Slot*> idle;  // resident, not busy; least recently used first
  for (Slot& slot : slots_) {
    if (!slot.busy() && cache_->table().Length(slot.seq) > 0) {
      idle.push_back(&slot);
    }
  }
  std::sort(idle.begin(), idle.end(),
            [](Slot* a, Slot* b) { return a->last_use < b->last_use; });
  Status first_error;
  for (Slot* slot : idle) {
    StatusOr<Eviction> evicted = vault_->Evict(slot->seq);
    if (evicted.ok()) return true;
    if (first_error.ok()) first_error = evicted.status();
  }
  if (idle.empty() || options_.on_kv_full == OnKvFull::kRefuse) return false;
  DropIdleKv(*idle.front(), first_error);
  return true;
}

void Engine::Impl::DropIdleKv(Slot& victim, const Status& why) {
  const uint64_t num_tokens = victim.cached.size();
  KV_LOG(WARNING) << "slot " << victim.id << ": dropped the idle KV of "
                  << num_tokens << " tokens for room (--on-kv-full drop-lru); "
                  << "no spill tier can take it: " << why;
  ++counters_.idle_kv_discards;
  counters_.idle_kv_discarded_tokens += num_tokens;
  Status erased = vault_->Erase(victim.seq);
  if (!erased.ok()) KV_LOG(WARNING) << erased;
  victim.cached.clear();
  victim.kv_dropped = num_tokens;
}

Status Engine::Impl::PoolFullError(const Slot& slot, uint64_t need_pages) {
  uint64_t idle_pages = 0;
  for (const Slot& s : slots_) {
    if (!s.busy()) idle_pages += cache_->table().Pages(s.seq).size();
  }
  std::string msg = "slot " + std::to_string(slot.id) + " needs " +
                    std::to_string(need_pages) + " more pages; the pool has " +
                    std::to_string(cache_->pool().num_free_pages()) + " free";
  if (idle_pages == 0) return ResourceExhaustedError(msg).WithReason("no_room");
  ++counters_.kv_full_refusals;
  return ResourceExhaustedError(
             msg + " and idle slots hold " + std::to_string(idle_pages) +
             " pages that no spill tier can take; --on-kv-full refuse keeps "
             "their KV (drop-lru would drop it)")
      .WithReason(kReasonKvFull);
}

bool Engine::Impl::PreemptYoungest() {
  Slot* youngest = nullptr;
  int num_in_batch = 0;
  for (Slot& slot : slots_) {
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

void Engine::Impl::Preempt(Slot& slot) {
  slot.request->preempted = true;
  vault_->SetActive(slot.seq, false);
  ++counters_.preemptions;
  if (cache_->table().Length(slot.seq) == 0) return;
  StatusOr<Eviction> evicted = vault_->Evict(slot.seq);
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
  ++counters_.preemptions_recomputed;
  DropKv(slot, "preempted");
}

void Engine::Impl::DropKv(Slot& slot, const char* why) {
  if (slot.request != nullptr) {
    std::vector<TokenId>& feed = slot.request->to_feed;
    feed.insert(feed.begin(), slot.cached.begin(), slot.cached.end());
  }
  Status erased = vault_->Erase(slot.seq);
  if (!erased.ok()) {
    KV_LOG(WARNING) << "slot " << slot.id << " (" << why << "): " << erased;
  }
  slot.cached.clear();
}

bool Engine::Impl::MakeRoomForPlan(std::vector<Part>* plan) {
  while (!plan->empty()) {
    const uint64_t need = PagesNeeded(*plan);
    if (need <= cache_->pool().num_free_pages()) return true;
    if (vault_->MakeRoom(need).ok()) return true;
    if (FreeOneIdleSlot()) continue;
    if (PreemptYoungest()) {
      *plan = PlanBatch();
      continue;
    }
    Slot& slot = *plan->front().slot;
    Fail(slot, PoolFullError(slot, need));
    plan->clear();
  }
  return false;
}

}  // namespace kvault
