#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>

#include "core/check.h"

namespace kvault {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Sanitize(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// The canonical candidate order: most likely first, then lowest id.
template <typename T>
bool Before(const T& a, const T& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// Returns log(sum(exp(logits))) in double, NaN treated as -inf; -inf when
// every logit is -inf.
double LogSumExp(std::span<const float> logits) {
  float max_logit = kNegInf;
  for (float l : logits) max_logit = std::max(max_logit, Sanitize(l));
  if (!std::isfinite(max_logit)) return max_logit;
  double sum = 0;
  for (float l : logits) {
    sum += std::exp(static_cast<double>(Sanitize(l)) - max_logit);
  }
  return max_logit + std::log(sum);
}

}  // namespace

SamplingParams SamplingParams::Greedy() {
  SamplingParams params;
  params.temperature = 0;
  return params;
}

Status SamplingParams::Validate() const {
  // Each field against its domain; NaN fails every comparison, so each
  // test is written to accept, not to reject.
  auto bad = [](const char* field, double value, const char* want) {
    return InvalidArgumentError(std::string("field '") + field + "': " +
                                std::to_string(value) + " is outside " + want)
        .WithReason("out_of_range");
  };
  if (!std::isfinite(temperature)) {
    return bad("temperature", temperature, "the finite numbers");
  }
  if (!(top_p >= 0 && top_p <= 1)) return bad("top_p", top_p, "[0, 1]");
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p", min_p, "[0, 1]");
  if (!(repeat_penalty > 0 && std::isfinite(repeat_penalty))) {
    return bad("repeat_penalty", repeat_penalty, "(0, inf)");
  }
  if (repeat_last_n < 0) {
    return bad("repeat_last_n", repeat_last_n, "[0, 2^31)");
  }
  return Status::Ok();
}

std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits,
                                      size_t n) {
  const double lse = LogSumExp(logits);
  std::vector<TokenLogprob> all(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    all[i].id = static_cast<TokenId>(i);
    all[i].logprob = Sanitize(logits[i]);  // the logit until scaled below
  }
  n = std::min(n, all.size());
  auto before = [](const TokenLogprob& a, const TokenLogprob& b) {
    if (a.logprob != b.logprob) return a.logprob > b.logprob;
    return a.id < b.id;
  };
  std::partial_sort(all.begin(), all.begin() + n, all.end(), before);
  all.resize(n);
  for (TokenLogprob& t : all) {
    t.logprob = std::isfinite(lse)
                    ? static_cast<float>(static_cast<double>(t.logprob) - lse)
                    : kNegInf;
  }
  return all;
}

TokenId ArgMax(std::span<const float> logits) {
  KV_CHECK(!logits.empty());
  size_t best = 0;
  float best_logit = Sanitize(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    // Strictly greater: the first (lowest id) of equal maxima wins.
    if (Sanitize(logits[i]) > best_logit) {
      best = i;
      best_logit = Sanitize(logits[i]);
    }
  }
  return static_cast<TokenId>(best);
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params),
      seed_(params.seed == kRandomSeed ? std::random_device{}() : params.seed),
      rng_(seed_) {
  KV_CHECK(params.Validate().ok()) << params.Validate().ToString();
}

void Sampler::Accept(TokenId token) {
  if (params_.repeat_last_n == 0) return;
  history_.push_back(token);
  while (history_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    history_.pop_front();
  }
}

void Sampler::Reset() {
  history_.clear();
  rng_.seed(seed_);
}

TokenId Sampler::Sample(std::span<const float> logits) {
  KV_CHECK(!logits.empty());
  const bool penalize = params_.repeat_penalty != 1.0f && !history_.empty();
  if (params_.temperature <= 0 && !penalize) return ArgMax(logits);
  Gather(logits);
  if (params_.temperature <= 0) {
    return std::min_element(candidates_.begin(), candidates_.end(),
                            Before<Candidate>)->id;
  }
  ApplyTopK();
  ApplyTopP();
  ApplyMinP();
  return Draw();
}

void Sampler::Gather(std::span<const float> logits) {
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_[i] = {static_cast<TokenId>(i), Sanitize(logits[i])};
  }
  sorted_ = false;
  if (params_.repeat_penalty == 1.0f) return;
  // llama.cpp penalises each distinct recent token once, whatever its count.
  std::unordered_set<TokenId> seen(history_.begin(), history_.end());
  for (TokenId id : seen) {
    if (id < 0 || static_cast<size_t>(id) >= candidates_.size()) continue;
    float& logit = candidates_[id].logit;
    logit = logit <= 0 ? logit * params_.repeat_penalty
                       : logit / params_.repeat_penalty;
  }
}

void Sampler::ApplyTopK() {
  const int32_t k = params_.top_k;
  if (k <= 0 || static_cast<size_t>(k) >= candidates_.size()) return;
  std::partial_sort(candidates_.begin(), candidates_.begin() + k,
                    candidates_.end(), Before<Candidate>);
  candidates_.resize(k);
  sorted_ = true;
}

void Sampler::ApplyTopP() {
  if (params_.top_p >= 1.0f || candidates_.size() <= 1) return;
  if (!sorted_) {
    std::sort(candidates_.begin(), candidates_.end(), Before<Candidate>);
    sorted_ = true;
  }
  const double max_logit = candidates_[0].logit;
  if (!std::isfinite(max_logit)) return;
  std::vector<double> probs(candidates_.size());  // [num_candidates]
  double sum = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probs[i] = std::exp(candidates_[i].logit - max_logit);
    sum += probs[i];
  }
  double cumulative = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += probs[i] / sum;
    if (cumulative >= params_.top_p) {
      candidates_.resize(i + 1);
      return;
    }
  }
}

void Sampler::ApplyMinP() {
  if (params_.min_p <= 0 || candidates_.size() <= 1) return;
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) {
    max_logit = std::max(max_logit, c.logit);
  }
  if (!std::isfinite(max_logit)) return;
  const float min_logit = max_logit + std::log(params_.min_p);
  // remove_if keeps the survivors' order, so sorted_ stays true if it was.
  candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                   [&](const Candidate& c) {
                                     return c.logit < min_logit;
                                   }),
                    candidates_.end());
}

TokenId Sampler::Draw() {
  // Every filter keeps the most likely candidate (min_p <= 1, top_p's first
  // entry, top_k >= 1), so the set is never empty here.
  KV_CHECK(!candidates_.empty());
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) {
    max_logit = std::max(max_logit, c.logit);
  }
  std::vector<double> weights(candidates_.size());  // [num_candidates]
  double total = 0;
  const double inv_temp = 1.0 / params_.temperature;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const float logit = candidates_[i].logit;
    // Equal to the max counts 1 so +inf and all -inf rows stay finite.
    weights[i] = logit == max_logit
                     ? 1.0
                     : std::exp((static_cast<double>(logit) - max_logit) *
                                inv_temp);
    total += weights[i];
  }
  const double target = NextUniform() * total;
  double cumulative = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) return candidates_[i].id;
  }
  // Rounding left target at the very top: the last token with weight.
  for (size_t i = candidates_.size(); i-- > 0;) {
    if (weights[i] > 0) return candidates_[i].id;
  }
  return candidates_.back().id;
}

double Sampler::NextUniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace kvault
