// The scheduler's policy: admission, the batch plan, the room ladder and
// resuming preempted requests (see scheduler.h).
#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace kvault {
Scheduler::Scheduler(const SchedulerOptions& options, SlotKv* kv,
                     ForwardPass* forward, const Tokenizer* tokenizer,
                     const SamplerVocab* vocab)
    : options_(options),
      kv_(kv),
      forward_(forward),
      state_(options.n_slots),
      generation_(options.generation, &state_, kv, forward, tokenizer, vocab),
      pressure_(options.on_kv_full, &state_, kv, &generation_),
      prefix_reuse_(options.prefix_cache, kv, &state_),
      jobs_(options.jobs, &state_, kv),
      pacer_(options.pacer) {}

// --- Admission -----------------------------------------------------------

void Scheduler::Enqueue(Work work) { queue_.push_back(std::move(work)); }

uint64_t Scheduler::NumQueuedCompletions() const {
  return std::count_if(queue_.begin(), queue_.end(), [](const Work& w) {
    return std::holds_alternative<CompletionWork>(w);
  });
}

bool Scheduler::HasRunnableWork() const {
  return std::any_of(state_.slots.begin(), state_.slots.end(),
                     [](const Slot& s) { return s.request != nullptr; });
}

bool Scheduler::HasWork() const {
  return HasRunnableWork() || (state_.may_admit && !queue_.empty());
}

bool Scheduler::Admit() {
  state_.may_admit = false;
  bool ran_action = false;
  std::vector<Work> waiting;  // back to the queue's front, in order
  for (Work& work : TakeRunnable()) {
    if (auto* action = std::get_if<SlotActionWork>(&work)) {
      jobs_.Start(std::move(*action));
      ran_action = true;
      continue;
    }
    auto& completion = std::get<CompletionWork>(work);
    Slot& slot = state_.slots[*completion.params.slot];
    if (MustWaitForRoom(slot, completion.params)) {
      waiting.push_back(std::move(work));
    } else {
      StartRequest(slot, std::move(completion));
    }
  }
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
    queue_.push_front(std::move(*it));
  }
  state_.SyncAtRest(*kv_);
  return ran_action;
}

std::vector<Work> Scheduler::TakeRunnable() {
  std::set<uint32_t> blocked;  // busy, or an earlier queued item waits
  bool preempted = false;
  for (const Slot& slot : state_.slots) {
    if (slot.busy()) blocked.insert(slot.id);
    preempted = preempted || slot.state == SlotState::kPreempted;
  }
  // New requests wait while preempted ones do: they resume first.
  const bool admit = !preempted;
  std::vector<Work> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    bool take = false;
    if (auto* action = std::get_if<SlotActionWork>(&*it)) {
      if (!action->slot) {
        take = jobs_.num_io_in_flight() == 0;  // defrag moves cells
      } else {
        take = !blocked.contains(*action->slot);
        blocked.insert(*action->slot);  // FIFO per slot
      }
    } else {
      CompletionParams& params = std::get<CompletionWork>(*it).params;
      if (params.slot) {
        take = admit && !blocked.contains(*params.slot);
        blocked.insert(*params.slot);
      } else if (admit) {
        std::optional<uint32_t> chosen = ChooseSlot(params, blocked);
        if (chosen) {
          params.slot = chosen;  // pinned from now on, even if it waits
          blocked.insert(*chosen);
        }
        take = chosen.has_value();
      }
    }
    if (take) {
      out.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<uint32_t> Scheduler::ChooseSlot(
    const CompletionParams& params, const std::set<uint32_t>& blocked) const {
  const Slot* best = nullptr;
  size_t best_prefix = 0;
  for (const Slot& slot : state_.slots) {
    if (blocked.contains(slot.id)) continue;
    const size_t prefix = CommonPrefix(slot.cached, params.prompt);
    if (best == nullptr || prefix > best_prefix ||
        (prefix == best_prefix && slot.last_use < best->last_use)) {
      best = &slot;
      best_prefix = prefix;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->id;
}

bool Scheduler::MustWaitForRoom(const Slot& slot,
                                const CompletionParams& params) {
  if (!params.cache_prompt || !kv_->IsSpilled(slot.seq) ||
      CommonPrefix(slot.cached, params.prompt) == 0) {
    return false;
  }
  const bool others_running = std::any_of(
      state_.slots.begin(), state_.slots.end(), [&](const Slot& other) {
        return other.id != slot.id && other.request != nullptr;
      });
  if (!others_running) return false;  // nothing will free room: recompute
  return kv_->BringBack(slot.seq).IsResourceExhausted();
}

// --- The step ------------------------------------------------------------

void Scheduler::Step() {
  ResumePreempted();
  std::vector<Part> plan = PlanBatch();
  while (MakeRoomForPlan(&plan) && !Decode(plan)) plan = PlanBatch();
  state_.SyncAtRest(*kv_);
}

void Scheduler::ResumePreempted() {
  std::vector<Slot*> waiting;
  for (Slot& slot : state_.slots) {
    if (slot.state == SlotState::kPreempted) waiting.push_back(&slot);
  }
  std::sort(waiting.begin(), waiting.end(), [](Slot* a, Slot* b) {
    return a->request->admit_order < b->request->admit_order;
  });
  const uint64_t page_size = kv_->page_size();
  auto pages = [&](uint64_t cells) { return PagesForCells(cells, page_size); };
  for (Slot* slot : waiting) {
    const bool others =
        std::any_of(state_.slots.begin(), state_.slots.end(),
                    [](const Slot& s) { return s.in_batch(); });
    const Request& req = *slot->request;
    if (others) {
      // Resume only when this step fits with it: no ping-pong.
      const uint64_t own = slot->cached.size() +
                           std::min<uint64_t>(req.to_feed.size(),
                                              options_.prefill_chunk);
      const uint64_t need = PagesNeeded(PlanBatch()) + pages(own) + 1;
      const uint64_t available =
          kv_->num_free_pages() + pressure_.IdlePages();
      if (available < need) break;  // oldest first: no overtaking
    }
    if (!pressure_.Resume(*slot)) {
      if (!others) {
        const uint64_t own = slot->cached.size() + req.to_feed.size();
        generation_.Fail(*slot, pressure_.PoolFullError(*slot, pages(own)));
      }
      break;
    }
  }
}

std::vector<Scheduler::Part> Scheduler::PlanBatch() {
  std::vector<Part> plan;
  size_t budget = options_.max_batch_tokens;
  auto wants_logits = [](const Request& req, size_t n) {
    return n == req.to_feed.size() &&
           (req.prompt_done || req.params.n_predict != 0);
  };
  for (Slot& slot : state_.slots) {  // decode tokens first
    if (!slot.in_batch() || slot.request->to_feed.size() != 1) continue;
    if (budget == 0) break;
    plan.push_back({&slot, 1, wants_logits(*slot.request, 1)});
    --budget;
  }
  std::vector<Slot*> prefill;
  for (Slot& slot : state_.slots) {
    if (slot.in_batch() && slot.request->to_feed.size() > 1) {
      prefill.push_back(&slot);
    }
  }
  std::sort(prefill.begin(), prefill.end(), [](Slot* a, Slot* b) {
    return a->request->admit_order < b->request->admit_order;
  });
  // Beside decoding slots, each step's prompt work is bounded so their
  // inter-token latency stays near (1 + share) x a plain decode step.
  const bool pace = !plan.empty();
  double allowance_ns = pacer_.AllowanceNs();
  for (Slot* slot : prefill) {
    size_t n = std::min<size_t>(
        {slot->request->to_feed.size(), options_.prefill_chunk, budget});
    if (pace) n = pacer_.Take(slot->cached.size(), n, &allowance_ns);
    if (n == 0) break;
    plan.push_back({slot, n, wants_logits(*slot->request, n)});
    budget -= n;
  }
  return plan;
}

uint64_t Scheduler::PagesNeeded(const std::vector<Part>& plan) const {
  uint64_t pages = 0;
  for (const Part& part : plan) {
    pages += kv_->PagesToGrow(part.slot->seq, part.num_tokens);
  }
  return pages;
}

// The room ladder: free pages, the vault evicting idle sequences, an idle
// slot spilled or dropped, the youngest request preempted; else the
// oldest planned request fails.
bool Scheduler::MakeRoomForPlan(std::vector<Part>* plan) {
  while (!plan->empty()) {
    const uint64_t need = PagesNeeded(*plan);
    if (need <= kv_->num_free_pages()) return true;
    if (kv_->MakeRoom(need).ok()) return true;
    if (pressure_.FreeOneIdleSlot()) continue;
    if (pressure_.PreemptYoungest()) {
      *plan = PlanBatch();
      continue;
    }
    Slot& slot = *plan->front().slot;
    generation_.Fail(slot, pressure_.PoolFullError(slot, need));
    plan->clear();
  }
  return false;
}

}  // namespace kvault
