// A request's output: sampling the next token from its logits, stop
// conditions (end of generation, n_predict, stop strings, the slot's
// context), streaming to the sink and the final result.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {

std::string Engine::Impl::FlushText(Request& request) {
  std::string text = request.stop.Flush();
  text += request.detok.Flush();
  return text;
}

CompletionTimings Engine::Impl::LiveTimings(const Request& req) {
  const EngineClock::time_point now = EngineClock::now();
  const EngineClock::time_point prompt_end =
      req.prompt_done ? req.prompt_end : now;
  CompletionTimings t = req.result.timings;
  t.prompt_ms = MsBetween(req.start, prompt_end);
  t.predicted_n = req.result.tokens.size();
  t.predicted_ms = req.prompt_done ? MsBetween(prompt_end, now) : 0;
  return t;
}

void Engine::Impl::ReportPromptProgress(const Slot& slot) const {
  const Request& req = *slot.request;
  if (!req.params.return_progress) return;
  PromptProgress p;
  p.total = req.params.prompt.size();
  p.cache = req.result.timings.cache_n;
  // Before the first batch nothing is evaluated: timings stay zero.
  p.processed = std::min<uint64_t>(slot.cached.size(), p.total);
  p.timings.cache_n = p.cache;
  if (p.processed > p.cache) {
    p.timings = LiveTimings(req);
    p.timings.prompt_n = p.processed - p.cache;
    p.time_ms = p.timings.prompt_ms;
  }
  req.sink->OnPromptProgress(p);
}

void Engine::Impl::HandleLogits(Slot& slot, std::span<const float> row) {
  Request& req = *slot.request;
  if (!req.prompt_done) {
    req.prompt_done = true;
    req.prompt_end = EngineClock::now();
  }
  TokenEvent event;
  event.slot = slot.id;
  event.token = req.sampler.Sample(row);
  if (!req.params.ignore_eos &&
      model_->tokenizer().vocab().IsEndOfGeneration(event.token)) {
    req.result.final_text = FlushText(req);
    req.result.content += req.result.final_text;
    Finish(slot, "eos", false);
    return;
  }
  if (req.params.n_probs > 0 && req.params.post_sampling_probs) {
    TokenProbs after = req.sampler.PostSamplingProbs(req.params.n_probs);
    event.post_sampling = true;
    event.post_probs = std::move(after.top);
    event.chosen_prob = after.chosen;
  } else if (req.params.n_probs > 0) {
    event.probs = TopLogprobs(row, req.params.n_probs);
  }
  req.sampler.AcceptGenerated(event.token);
  req.result.tokens.push_back(event.token);
  req.to_feed.assign(1, event.token);
  StopMatcher::Output out = req.stop.Push(req.detok.Push(event.token));
  std::string stop_type;
  bool truncated = false;
  if (out.match) {
    stop_type = "word";
    req.result.stopping_word = *out.match;
  } else if (req.params.n_predict > 0 &&
             req.result.tokens.size() >=
                 static_cast<size_t>(req.params.n_predict)) {
    stop_type = "limit";
  } else if (slot.cached.size() + 1 >= options_.ctx_per_slot) {
    // Prompt and output fill the context, as llama-server counts it (the
    // last token is returned, never evaluated), unless it may shift.
    truncated = true;
    if (!ShiftContext(slot)) stop_type = "limit";
  }
  req.result.truncated |= truncated;
  if (!stop_type.empty() && !out.match) out.text += FlushText(req);
  req.result.content += out.text;
  event.text = std::move(out.text);
  event.timings = LiveTimings(req);
  const bool keep_going = req.sink->OnToken(event);
  if (!stop_type.empty()) {
    Finish(slot, stop_type, truncated);
  } else if (!keep_going) {
    Fail(slot, CancelledStatus("task " + std::to_string(req.task_id) +
                              " (its sink)"));
  }
}

bool Engine::Impl::ShiftContext(Slot& slot) {
  if (!options_.context_shift) return false;
  const CompletionParams& params = slot.request->params;
  const int64_t n_cached = static_cast<int64_t>(slot.cached.size());
  const int64_t n_ctx = options_.ctx_per_slot;
  // As llama-server: n_keep counts from after BOS; < 0 keeps the prompt.
  const bool bos = model_->tokenizer().vocab().add_bos;
  int64_t n_keep = params.n_keep < 0
                       ? static_cast<int64_t>(params.prompt.size())
                       : int64_t{params.n_keep};
  if (bos) ++n_keep;
  n_keep = std::min(n_keep, n_ctx - 4);
  const int64_t n_left = n_cached - n_keep;
  const int64_t n_discard =
      params.n_discard > 0 ? std::min<int64_t>(params.n_discard, n_left)
                           : n_left / 2;
  if (n_keep < 0 || n_discard <= 0) return false;
  Status shifted = context_->DiscardRange(
      slot.seq, static_cast<Pos>(n_keep), static_cast<Pos>(n_keep + n_discard));
  if (!shifted.ok()) {
    KV_LOG(WARNING) << "slot " << slot.id << ": context shift failed ("
                    << shifted << "); the request stops here";
    return false;
  }
  slot.cached.erase(slot.cached.begin() + n_keep,
                    slot.cached.begin() + n_keep + n_discard);
  KV_LOG(INFO) << "slot " << slot.id << ": context shift, n_keep = " << n_keep
               << ", n_left = " << n_left << ", n_discard = " << n_discard;
  return true;
}

void Engine::Impl::Finish(Slot& slot, const std::string& stop_type,
                          bool truncated) {
  Request& req = *slot.request;
  const EngineClock::time_point now = EngineClock::now();
  CompletionResult& r = req.result;
  r.stop_type = stop_type;
  r.truncated = r.truncated || truncated;
  r.tokens_predicted = r.tokens.size();
  r.tokens_cached = slot.cached.size();
  const EngineClock::time_point prompt_end =
      req.prompt_done ? req.prompt_end : now;
  r.timings.prompt_ms = MsBetween(req.start, prompt_end);
  r.timings.predicted_n = r.tokens.size();
  r.timings.predicted_ms = MsBetween(prompt_end, now);
  counters_.prompt_tokens_total += r.timings.prompt_n;
  counters_.prompt_tokens_cached_total += r.timings.cache_n;
  counters_.n_tokens_max = std::max<uint64_t>(
      counters_.n_tokens_max, r.timings.prompt_n + r.timings.cache_n +
                                  r.timings.predicted_n);
  counters_.prompt_seconds_total += r.timings.prompt_ms / 1e3;
  counters_.tokens_predicted_total += r.timings.predicted_n;
  counters_.predicted_seconds_total += r.timings.predicted_ms / 1e3;
  deferred_.push_back([sink = req.sink, result = std::move(r)] {
    sink->OnDone(result);
  });
  ReleaseSlot(slot);
}

void Engine::Impl::Fail(Slot& slot, const Status& status) {
  Request& req = *slot.request;
  if (status.reason() != kReasonCancelled) ++counters_.requests_failed;
  deferred_.push_back(
      [sink = req.sink, status] { sink->OnDone(status); });
  ReleaseSlot(slot);
}

void Engine::Impl::ReleaseSlot(Slot& slot) {
  slot.last_n_decoded = slot.request->result.tokens.size();
  slot.request.reset();
  queue_may_progress_ = true;
  vault_->SetActive(slot.seq, false);
  vault_->Touch(slot.seq);
  slot.last_use = ++clock_;
}

}  // namespace kvault
