#include "engine/generation.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace kvault {

Generation::Generation(const GenerationOptions& options, SchedulerState* state,
                       SlotKv* kv, ForwardPass* forward,
                       const Tokenizer* tokenizer, const SamplerVocab* vocab)
    : options_(options),
      state_(state),
      kv_(kv),
      forward_(forward),
      tokenizer_(tokenizer),
      vocab_(vocab) {}

std::unique_ptr<Request> Generation::NewRequest(CompletionWork work) {
  SamplerContext sampling;
  sampling.vocab = vocab_;
  if (work.params.sampling.grammar != nullptr) {
    if (grammar_trie_ == nullptr) grammar_trie_ = BuildGrammarTrie(*vocab_);
    sampling.grammar_trie = grammar_trie_.get();
  }
  sampling.n_ctx_train = static_cast<int32_t>(options_.n_ctx_train);
  sampling.n_ctx_slot = static_cast<int32_t>(options_.ctx_per_slot);
  return std::make_unique<Request>(work.task_id, std::move(work.params),
                                   std::move(work.sink), tokenizer_, sampling);
}

std::string Generation::FlushText(Request& request) {
  std::string text = request.stop.Flush();
  text += request.detok.Flush();
  return text;
}

CompletionTimings Generation::LiveTimings(const Request& req) {
  const EngineClock::time_point now = EngineClock::now();
  const EngineClock::time_point prompt_end =
      req.prompt_done ? req.prompt_end : now;
  CompletionTimings t = req.result.timings;
  t.prompt_ms = MsBetween(req.start, prompt_end);
  t.predicted_n = req.result.tokens.size();
  t.predicted_ms = req.prompt_done ? MsBetween(prompt_end, now) : 0;
  return t;
}

void Generation::ReportPromptProgress(const Slot& slot) const {
  const Request& req = *slot.request;
  if (!req.params.return_progress) return;
  PromptProgress p;
  p.slot = slot.id;
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

void Generation::HandleLogits(Slot& slot, std::span<const float> row) {
  Request& req = *slot.request;
  if (!req.prompt_done) {
    req.prompt_done = true;
    req.prompt_end = EngineClock::now();
    state_->SetState(slot, SlotState::kGenerating);
  }
  TokenEvent event;
  event.slot = slot.id;
  event.token = req.sampler.Sample(row);
  if (!req.sampler.grammar_error().ok()) {
    // Ending here would leave the output outside the grammar.
    Fail(slot, req.sampler.grammar_error());
    return;
  }
  if (!req.params.ignore_eos &&
      tokenizer_->vocab().IsEndOfGeneration(event.token)) {
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
    // The sampled token is usually listed: its value is there already
    // (the same computation); another pass over the vocabulary otherwise.
    auto listed = std::find_if(
        event.probs.begin(), event.probs.end(),
        [&](const TokenLogprob& p) { return p.id == event.token; });
    event.logprob = listed != event.probs.end()
                        ? listed->logprob
                        : LogprobOf(row, event.token);
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
  } else if (req.params.n_predict < 0 && options_.n_ctx_train > 0 &&
             req.params.prompt.size() + req.result.tokens.size() >=
                 options_.n_ctx_train) {
    // As llama-server: with no budget from the request or -n, generation
    // ends at the model's training context, even where the context could
    // shift forever (a model that never writes EOS, or ignore_eos).
    stop_type = "limit";
    truncated = true;
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

bool Generation::ShiftContext(Slot& slot) {
  if (!options_.context_shift) return false;
  const CompletionParams& params = slot.request->params;
  const int64_t n_cached = static_cast<int64_t>(slot.cached.size());
  const int64_t n_ctx = options_.ctx_per_slot;
  // As llama-server: n_keep counts from after BOS; < 0 keeps the prompt.
  int64_t n_keep = params.n_keep < 0
                       ? static_cast<int64_t>(params.prompt.size())
                       : int64_t{params.n_keep};
  if (tokenizer_->vocab().add_bos) ++n_keep;
  n_keep = std::min(n_keep, n_ctx - 4);
  const int64_t n_left = n_cached - n_keep;
  const int64_t n_discard =
      params.n_discard > 0 ? std::min<int64_t>(params.n_discard, n_left)
                           : n_left / 2;
  if (n_keep < 0 || n_discard <= 0) return false;
  Status shifted = forward_->DiscardRange(
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

void Generation::Finish(Slot& slot, const std::string& stop_type,
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
  EngineMetrics& c = state_->counters;
  c.prompt_tokens_total += r.timings.prompt_n;
  c.prompt_tokens_cached_total += r.timings.cache_n;
  c.n_tokens_max = std::max<uint64_t>(
      c.n_tokens_max,
      r.timings.prompt_n + r.timings.cache_n + r.timings.predicted_n);
  c.prompt_seconds_total += r.timings.prompt_ms / 1e3;
  kv_->NotePrefill(r.timings.prompt_n, r.timings.prompt_ms / 1e3);
  c.tokens_predicted_total += r.timings.predicted_n;
  c.predicted_seconds_total += r.timings.predicted_ms / 1e3;
  state_->deliveries.push_back(
      [sink = req.sink, result = std::move(r)] { sink->OnDone(result); });
  Release(slot);
}

void Generation::Fail(Slot& slot, const Status& status) {
  Request& req = *slot.request;
  if (status.reason() != kReasonCancelled) ++state_->counters.requests_failed;
  state_->deliveries.push_back(
      [sink = req.sink, status] { sink->OnDone(status); });
  Release(slot);
}

void Generation::Release(Slot& slot) {
  slot.last_n_decoded = slot.request->result.tokens.size();
  slot.request.reset();
  kv_->PublishPrefix(slot.seq);
  kv_->SetActive(slot.seq, false);
  kv_->Touch(slot.seq);
  slot.last_use = state_->Tick();
  state_->SetAtRest(slot, *kv_);
}

}  // namespace kvault
