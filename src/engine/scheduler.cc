#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/log.h"

namespace kvault {
namespace {

constexpr Pos kEndPos = std::numeric_limits<Pos>::max();

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options, SlotKv* kv,
                     ForwardPass* forward, const Tokenizer* tokenizer,
                     const SamplerVocab* vocab)
    : options_(options),
      kv_(kv),
      forward_(forward),
      state_(options.n_slots),
      generation_(options.generation, &state_, kv, forward, tokenizer, vocab),
      pressure_(options.on_kv_full, &state_, kv, &generation_),
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

void Scheduler::StartRequest(Slot& slot, CompletionWork work) {
  std::unique_ptr<Request> request = generation_.NewRequest(std::move(work));
  Request& req = *request;
  req.admit_order = ++admit_counter_;
  const std::vector<TokenId>& prompt = req.params.prompt;
  const size_t keep = ReusePrefix(slot, req.params);
  req.to_feed.assign(prompt.begin() + keep, prompt.end());
  for (TokenId token : prompt) req.sampler.Accept(token);
  req.result.slot = slot.id;
  req.result.tokens_evaluated = prompt.size();
  req.result.timings.cache_n = keep;
  req.result.timings.prompt_n = prompt.size() - keep;
  slot.last_params = req.params.sampling;
  slot.last_n_predict = req.params.n_predict;
  slot.last_task = req.task_id;
  slot.last_use = state_.Tick();
  slot.request = std::move(request);
  state_.SetState(slot, SlotState::kPrefilling);
  kv_->SetActive(slot.seq, true);
  kv_->Touch(slot.seq);
  ++state_.counters.requests_total;
  generation_.ReportPromptProgress(slot);
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

size_t Scheduler::ReusePrefix(Slot& slot, const CompletionParams& params) {
  size_t keep =
      params.cache_prompt ? CommonPrefix(slot.cached, params.prompt) : 0;
  // The last prompt token is always evaluated: its logits start generation.
  if (keep == params.prompt.size()) --keep;
  if (keep > 0 && kv_->IsSpilled(slot.seq)) {
    if (Status back = kv_->BringBack(slot.seq); !back.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id
                      << ": cannot bring back its spilled KV, recomputing "
                      << keep << " prompt tokens: " << back;
      keep = 0;
    }
  }
  if (keep > 0 && keep < slot.cached.size()) {
    Status trimmed = kv_->Truncate(slot.seq, static_cast<Pos>(keep));
    if (!trimmed.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id << ": trimming to " << keep
                      << " tokens failed, recomputing: " << trimmed;
      keep = 0;
    } else {
      slot.cached.resize(keep);
    }
  }
  if (keep == 0) {
    Status erased = kv_->Erase(slot.seq);
    if (!erased.ok()) KV_LOG(WARNING) << "slot " << slot.id << ": " << erased;
    slot.cached.clear();
  }
  return keep;
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
  auto pages = [&](uint64_t cells) {
    return (cells + page_size - 1) / page_size;
  };
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

bool Scheduler::Decode(const std::vector<Part>& plan) {
  std::vector<BatchToken> batch;  // [num tokens of the plan]
  bool had_decode = false;
  double units = 0;  // the plan's prefill work, in pacer units
  for (const Part& part : plan) {
    const Slot& slot = *part.slot;
    for (size_t i = 0; i < part.num_tokens; ++i) {
      batch.push_back({slot.seq, slot.request->to_feed[i],
                       static_cast<Pos>(slot.cached.size() + i),
                       part.want_logits && i + 1 == part.num_tokens});
    }
    if (slot.request->to_feed.size() > 1) {
      units += pacer_.Units(part.num_tokens, slot.cached.size());
    } else {
      had_decode = true;
    }
  }
  const EngineClock::time_point start = EngineClock::now();
  StatusOr<std::vector<float>> logits = forward_->Decode(batch);
  if (logits.ok()) {
    pacer_.Observe(std::chrono::duration<double, std::nano>(
                               EngineClock::now() - start).count(),
                           had_decode, units);
    ++state_.counters.forward_calls;
    state_.counters.busy_slot_steps += plan.size();  // one part per slot
    ApplyDecoded(plan, *logits);
    return true;
  }
  // A placement can fail with enough free pages (contiguous policies).
  if (logits.status().IsResourceExhausted() &&
      (pressure_.FreeOneIdleSlot() || pressure_.PreemptYoungest())) {
    return false;
  }
  KV_LOG(ERROR) << "forward pass failed: " << logits.status();
  for (const Part& part : plan) generation_.Fail(*part.slot, logits.status());
  return true;
}

void Scheduler::ApplyDecoded(const std::vector<Part>& plan,
                             const std::vector<float>& logits) {
  for (const Part& part : plan) {
    Slot& slot = *part.slot;
    std::vector<TokenId>& feed = slot.request->to_feed;
    slot.cached.insert(slot.cached.end(), feed.begin(),
                       feed.begin() + part.num_tokens);
    feed.erase(feed.begin(), feed.begin() + part.num_tokens);
    if (!slot.request->prompt_done) generation_.ReportPromptProgress(slot);
  }
  const size_t n_vocab = forward_->n_vocab();
  size_t row = 0;
  for (const Part& part : plan) {
    Slot& slot = *part.slot;
    if (part.want_logits) {
      generation_.HandleLogits(
          slot, std::span(logits.data() + row * n_vocab, n_vocab));
      ++row;
    } else if (slot.request->to_feed.empty()) {
      // n_predict == 0: the prompt is evaluated, nothing is generated.
      slot.request->prompt_done = true;
      slot.request->prompt_end = EngineClock::now();
      generation_.Finish(slot, "limit", false);
    }
  }
}

}  // namespace kvault
