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
  req.sampler.Accept(event.token);
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
    // last token is returned, never evaluated).
    stop_type = "limit";
    truncated = true;
  }
  if (!stop_type.empty() && !out.match) out.text += FlushText(req);
  req.result.content += out.text;
  event.text = std::move(out.text);
  const bool keep_going = req.sink->OnToken(event);
  if (!stop_type.empty()) {
    Finish(slot, stop_type, truncated);
  } else if (!keep_going) {
    Fail(slot, CancelledStatus("task " + std::to_string(req.task_id) +
                              " (its sink)"));
  }
}

void Engine::Impl::Finish(Slot& slot, const std::string& stop_type,
                          bool truncated) {
  Request& req = *slot.request;
  const EngineClock::time_point now = EngineClock::now();
  CompletionResult& r = req.result;
  r.stop_type = stop_type;
  r.truncated = truncated;
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
