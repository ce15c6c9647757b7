// Carrying out the scheduler's decisions: starting a request in its slot
// (reusing the cached prefix), decoding a planned batch and handing each
// slot its logits.
#include <algorithm>
#include <chrono>
#include <utility>

#include "core/log.h"
#include "engine/scheduler.h"

namespace kvault {

void Scheduler::StartRequest(Slot& slot, CompletionWork work) {
  std::unique_ptr<Request> request = generation_.NewRequest(std::move(work));
  Request& req = *request;
  req.admit_order = ++admit_counter_;
  const std::vector<TokenId>& prompt = req.params.prompt;
  const size_t keep = prefix_reuse_.Reuse(slot, req.params);
  if (options_.cache_idle_slots) SpillIdleSlots(slot);
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
  slot.request->sink->OnStart(slot.id);
  generation_.ReportPromptProgress(slot);
}

void Scheduler::SpillIdleSlots(const Slot& running) {
  for (Slot& other : state_.slots) {
    if (&other == &running || other.busy()) continue;
    const uint64_t resident = kv_->ResidentLength(other.seq);
    if (resident == 0) continue;
    StatusOr<Eviction> spilled = kv_->Evict(other.seq);
    if (!spilled.ok()) {
      KV_LOG(WARNING) << "slot " << other.id << ": idle KV of " << resident
                      << " tokens stays in the pool: " << spilled.status();
      continue;
    }
    KV_LOG(INFO) << "slot " << other.id << ": saving the idle slot's KV ("
                 << resident << " tokens) to the " << spilled->tier
                 << " tier (--cache-idle-slots)";
    // The line llama.cpp's server tests look for in a verbose log.
    KV_LOG(DEBUG) << "slot " << other.id << ": __TEST_TAG_CACHE_IDLE_SLOT__";
    state_.SetAtRest(other, *kv_);
  }
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
