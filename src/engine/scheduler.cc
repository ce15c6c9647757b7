// The scheduler's step: admitting queued work into slots, building one
// continuous batch (decode tokens first, then prompt chunks), making room
// in the pool (spill idle slots, then preempt the youngest request),
// decoding, and sampling/streaming each slot's next token.
#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {
namespace {

constexpr Pos kEndPos = std::numeric_limits<Pos>::max();

}  // namespace

bool Engine::Impl::HasRunnableWork() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) {
    return s.request != nullptr;  // in a batch, or preempted and waiting
  });
}

void Engine::Impl::ProcessCancels(const std::set<uint64_t>& task_ids) {
  if (task_ids.empty()) return;
  std::vector<WorkItem> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (!it->is_action && task_ids.contains(it->task_id)) {
        cancelled.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (WorkItem& item : cancelled) {
    deferred_.push_back(
        [sink = item.sink, status = CancelledStatus(
                               "task " + std::to_string(item.task_id))] {
          sink->OnDone(status);
        });
  }
  for (Slot& slot : slots_) {
    if (slot.request != nullptr && task_ids.contains(slot.request->task_id)) {
      Fail(slot, CancelledStatus("task " + std::to_string(slot.request->task_id)));
    }
  }
}

std::vector<Engine::Impl::WorkItem> Engine::Impl::TakeRunnable() {
  std::set<uint32_t> blocked;  // busy, or an earlier queued item waits
  bool preempted = false;
  for (const Slot& slot : slots_) {
    if (slot.busy()) blocked.insert(slot.id);
    if (slot.request != nullptr && slot.request->preempted) preempted = true;
  }
  // New requests wait while preempted ones do: they resume first.
  const bool admit = !preempted;
  std::vector<WorkItem> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    bool take = false;
    if (it->is_action && !it->slot) {
      take = io_in_flight_ == 0;  // defrag moves cells: never during I/O
    } else if (it->slot) {
      take = !blocked.contains(*it->slot) && (it->is_action || admit);
      blocked.insert(*it->slot);  // FIFO per slot
    } else if (admit) {
      it->slot = ChooseSlot(it->params, blocked);
      if (it->slot) blocked.insert(*it->slot);
      take = it->slot.has_value();
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

std::optional<uint32_t> Engine::Impl::ChooseSlot(
    const CompletionParams& params, const std::set<uint32_t>& blocked) const {
  const Slot* best = nullptr;
  size_t best_prefix = 0;
  for (const Slot& slot : slots_) {
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

void Engine::Impl::StartRequest(Slot& slot, WorkItem item) {
  SamplerContext sampling;
  sampling.vocab = sampler_vocab_.get();
  if (item.params.sampling.grammar != nullptr) {
    if (grammar_trie_ == nullptr) {
      grammar_trie_ = BuildGrammarTrie(*sampler_vocab_);
    }
    sampling.grammar_trie = grammar_trie_.get();
  }
  sampling.n_ctx_train = static_cast<int32_t>(model_->hparams().n_ctx_train);
  sampling.n_ctx_slot = static_cast<int32_t>(options_.ctx_per_slot);
  auto request = std::make_unique<Request>(item.task_id, std::move(item.params),
                                           std::move(item.sink),
                                           &model_->tokenizer(), sampling);
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
  slot.last_use = ++clock_;
  slot.request = std::move(request);
  vault_->SetActive(slot.seq, true);
  vault_->Touch(slot.seq);
  ++counters_.requests_total;
  ReportPromptProgress(slot);
}

bool Engine::Impl::MustWaitForRoom(const Slot& slot,
                                   const CompletionParams& params) {
  if (!params.cache_prompt || !vault_->IsSpilled(slot.seq) ||
      CommonPrefix(slot.cached, params.prompt) == 0) {
    return false;
  }
  const bool others_running =
      std::any_of(slots_.begin(), slots_.end(), [&](const Slot& other) {
        return other.id != slot.id && other.request != nullptr;
      });
  if (!others_running) return false;  // nothing will free room: recompute
  StatusOr<std::optional<VaultRestoreResult>> back =
      vault_->EnsureResident(slot.seq);
  return !back.ok() && back.status().code() == StatusCode::kResourceExhausted;
}

size_t Engine::Impl::ReusePrefix(Slot& slot, const CompletionParams& params) {
  size_t keep =
      params.cache_prompt ? CommonPrefix(slot.cached, params.prompt) : 0;
  // The last prompt token is always evaluated: its logits start generation.
  if (keep == params.prompt.size()) --keep;
  if (keep > 0 && vault_->IsSpilled(slot.seq)) {
    StatusOr<std::optional<VaultRestoreResult>> back =
        vault_->EnsureResident(slot.seq);
    if (!back.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id
                      << ": cannot bring back its spilled KV, recomputing "
                      << keep << " prompt tokens: " << back.status();
      keep = 0;
    }
  }
  if (keep > 0 && keep < slot.cached.size()) {
    Status trimmed = cache_->RemoveRange(slot.seq, static_cast<Pos>(keep),
                                         kEndPos);
    if (!trimmed.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id << ": trimming to " << keep
                      << " tokens failed, recomputing: " << trimmed;
      keep = 0;
    } else {
      slot.cached.resize(keep);
    }
  }
  if (keep == 0) {
    Status erased = vault_->Erase(slot.seq);
    if (!erased.ok()) KV_LOG(WARNING) << "slot " << slot.id << ": " << erased;
    slot.cached.clear();
  }
  return keep;
}

// --- The step ----------------------------------------------------------------

std::vector<Engine::Impl::Part> Engine::Impl::PlanBatch() {
  std::vector<Part> plan;
  size_t budget = options_.max_batch_tokens;
  auto wants_logits = [](const Request& req, size_t n) {
    return n == req.to_feed.size() &&
           (req.prompt_done || req.params.n_predict != 0);
  };
  for (Slot& slot : slots_) {  // decode tokens first
    if (!slot.in_batch() || slot.request->to_feed.size() != 1) continue;
    if (budget == 0) break;
    plan.push_back({&slot, 1, wants_logits(*slot.request, 1)});
    --budget;
  }
  std::vector<Slot*> prefill;
  for (Slot& slot : slots_) {
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

void Engine::Impl::Step() {
  std::vector<Part> plan = PlanBatch();
  while (MakeRoomForPlan(&plan)) {
    std::vector<BatchToken> batch;  // [num tokens of the plan]
    for (const Part& part : plan) {
      const Slot& slot = *part.slot;
      for (size_t i = 0; i < part.num_tokens; ++i) {
        batch.push_back({slot.seq, slot.request->to_feed[i],
                         static_cast<Pos>(slot.cached.size() + i),
                         part.want_logits && i + 1 == part.num_tokens});
      }
    }
    bool had_decode = false;
    const double units = PrefillUnits(plan, &had_decode);
    const EngineClock::time_point start = EngineClock::now();
    StatusOr<std::vector<float>> logits = context_->Decode(batch);
    if (logits.ok()) {
      pacer_.Observe(std::chrono::duration<double, std::nano>(
                         EngineClock::now() - start).count(),
                     had_decode, units);
      ++counters_.forward_calls;
      counters_.busy_slot_steps += plan.size();  // one part per slot
      ApplyDecoded(plan, *logits);
      return;
    }
    // A placement can fail with enough free pages (contiguous policies).
    if (logits.status().IsResourceExhausted() &&
        (FreeOneIdleSlot() || PreemptYoungest())) {
      plan = PlanBatch();
      continue;
    }
    KV_LOG(ERROR) << "forward pass failed: " << logits.status();
    for (const Part& part : plan) Fail(*part.slot, logits.status());
    return;
  }
}

double Engine::Impl::PrefillUnits(const std::vector<Part>& plan,
                                  bool* had_decode) const {
  double units = 0;
  for (const Part& part : plan) {
    if (part.slot->request->to_feed.size() > 1) {
      units += pacer_.Units(part.num_tokens, part.slot->cached.size());
    } else {
      *had_decode = true;
    }
  }
  return units;
}

void Engine::Impl::ApplyDecoded(const std::vector<Part>& plan,
                                const std::vector<float>& logits) {
  for (const Part& part : plan) {
    Slot& slot = *part.slot;
    std::vector<TokenId>& feed = slot.request->to_feed;
    slot.cached.insert(slot.cached.end(), feed.begin(),
                       feed.begin() + part.num_tokens);
    feed.erase(feed.begin(), feed.begin() + part.num_tokens);
    if (!slot.request->prompt_done) ReportPromptProgress(slot);
  }
  const size_t n_vocab = model_->n_vocab();
  size_t row = 0;
  for (const Part& part : plan) {
    Slot& slot = *part.slot;
    if (part.want_logits) {
      HandleLogits(slot, std::span(logits.data() + row * n_vocab, n_vocab));
      ++row;
    } else if (slot.request->to_feed.empty()) {
      // n_predict == 0: the prompt is evaluated, nothing is generated.
      slot.request->prompt_done = true;
      slot.request->prompt_end = EngineClock::now();
      Finish(slot, "limit", false);
    }
  }
}

}  // namespace kvault
