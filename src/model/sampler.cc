#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/check.h"
#include "model/sampling_stages.h"

namespace kvault {
namespace {

using sampling::Candidate;
using sampling::CandidateView;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Sanitize(float logit) { return std::isnan(logit) ? kNegInf : logit; }

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

uint32_t ChooseSeed(uint64_t requested) {
  const uint32_t seed = static_cast<uint32_t>(requested);
  if (seed != static_cast<uint32_t>(kRandomSeed)) return seed;
  return std::random_device{}();
}

bool ByProbDesc(const Candidate& a, const Candidate& b) { return a.p > b.p; }

}  // namespace

std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, size_t n) {
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

float LogprobOf(std::span<const float> logits, TokenId id) {
  KV_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size());
  const double lse = LogSumExp(logits);
  if (!std::isfinite(lse)) return kNegInf;
  return static_cast<float>(
      static_cast<double>(Sanitize(logits[static_cast<size_t>(id)])) - lse);
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

TokenProbs PreSamplingProbs(std::span<const float> logits, size_t n,
                            TokenId chosen) {
  std::vector<Candidate> all(logits.size());  // [n_vocab]
  for (size_t i = 0; i < logits.size(); ++i) {
    all[i] = {static_cast<TokenId>(i), Sanitize(logits[i]), 0.0f};
  }
  n = std::min(n, all.size());
  // llama-server orders only the n best, then sums exp() over the whole
  // list in the order that leaves (which fixes the float rounding).
  float max_logit = kNegInf;
  if (n > 0) {
    std::partial_sort(all.begin(), all.begin() + n, all.end(),
                      [](const Candidate& a, const Candidate& b) {
                        return a.logit > b.logit;
                      });
    max_logit = all[0].logit;
  } else {
    for (const Candidate& c : all) max_logit = std::max(max_logit, c.logit);
  }
  float sum = 0.0f;
  for (Candidate& c : all) {
    c.p = std::exp(c.logit - max_logit);
    sum += c.p;
  }
  TokenProbs out;
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].p /= sum;
    if (i < n) out.top.push_back({all[i].id, all[i].p});
  }
  for (const Candidate& c : all) {
    if (c.id == chosen) {
      out.chosen = c.p;
      break;
    }
  }
  return out;
}

Sampler::Sampler(const SamplingParams& params)
    : Sampler(params, SamplerContext{}) {}

Sampler::Sampler(const SamplingParams& params, const SamplerContext& context)
    : params_(params), seed_(ChooseSeed(params.seed)) {
  KV_CHECK(params.Validate().ok()) << params.Validate().ToString();
  if (context.n_ctx_slot > 0) params_.ResolveContextSize(context.n_ctx_slot);
  BuildChain(context);
  if (params_.grammar != nullptr) {
    KV_CHECK(context.vocab != nullptr && context.grammar_trie != nullptr)
        << "a grammar needs the vocabulary and its trie";
    grammar_ = std::make_unique<SamplerGrammar>(
        params_.grammar, context.vocab, context.grammar_trie);
    end_token_ = context.vocab->EndOfTurnOrSequence();
  }
  if (!params_.scripted_tokens.empty()) {
    KV_CHECK(context.vocab != nullptr) << "a scripted reply needs the vocab";
    end_token_ = context.vocab->EndOfTurnOrSequence();
  }
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

void Sampler::BuildChain(const SamplerContext& context) {
  const SamplingParams& p = params_;
  auto add = [this](std::unique_ptr<sampling::Stage> stage) {
    if (stage != nullptr) stages_.push_back(std::move(stage));
  };
  add(sampling::MakeLogitBias(p.logit_bias));
  switch (p.mirostat) {
    case 0:
      AddFilters(context);
      break;
    case 1:
      add(sampling::MakeTemperature(p.temperature));
      add(sampling::MakeMirostat(0, seed_, p.mirostat_tau, p.mirostat_eta,
                                 100));
      break;
    default:
      add(sampling::MakeTemperature(p.temperature));
      add(sampling::MakeMirostatV2(seed_, p.mirostat_tau, p.mirostat_eta));
      break;
  }
}

void Sampler::AddFilters(const SamplerContext& context) {
  const SamplingParams& p = params_;
  sampling::DryConfig dry{p.dry_multiplier,     p.dry_base,
                          p.dry_allowed_length, p.dry_penalty_last_n,
                          context.n_ctx_train,  p.dry_sequence_breakers};
  if (dry.n_ctx_train <= 0) dry.n_ctx_train = std::numeric_limits<int>::max();
  bool adaptive = false;
  for (SamplerType type : p.samplers) {
    if (type == SamplerType::kAdaptiveP) {
      adaptive = true;  // it draws, so it goes last, once
      continue;
    }
    std::unique_ptr<sampling::Stage> stage =
        type == SamplerType::kDry ? sampling::MakeDry(dry, context.vocab)
                                  : MakeFilter(type, context);
    if (stage != nullptr) stages_.push_back(std::move(stage));
  }
  stages_.push_back(adaptive ? sampling::MakeAdaptiveP(p.adaptive_target,
                                                       p.adaptive_decay, seed_)
                             : sampling::MakeDist(seed_));
}

std::unique_ptr<sampling::Stage> Sampler::MakeFilter(
    SamplerType type, const SamplerContext& context) const {
  const SamplingParams& p = params_;
  const size_t min_keep = static_cast<size_t>(p.min_keep);
  switch (type) {
    case SamplerType::kTopK:
      return sampling::MakeTopK(p.top_k);
    case SamplerType::kTopP:
      return sampling::MakeTopP(p.top_p, min_keep);
    case SamplerType::kTopNSigma:
      return sampling::MakeTopNSigma(p.top_n_sigma);
    case SamplerType::kMinP:
      return sampling::MakeMinP(p.min_p, min_keep);
    case SamplerType::kXtc:
      return sampling::MakeXtc(p.xtc_probability, p.xtc_threshold, min_keep,
                               seed_);
    case SamplerType::kTypicalP:
      return sampling::MakeTypical(p.typical_p, min_keep);
    case SamplerType::kTemperature:
      return sampling::MakeTemperatureExt(p.temperature, p.dynatemp_range,
                                          p.dynatemp_exponent);
    case SamplerType::kInfill:
      return sampling::MakeInfill(context.vocab);
    case SamplerType::kPenalties:
      return sampling::MakePenalties(p.repeat_last_n, p.repeat_penalty,
                                     p.frequency_penalty, p.presence_penalty);
    case SamplerType::kDry:
    case SamplerType::kAdaptiveP:
      break;  // built by AddFilters
  }
  return nullptr;
}

TokenId Sampler::Sample(std::span<const float> logits) {
  KV_CHECK(!logits.empty());
  const TokenId id = RunChain(logits);
  if (!params_.scripted_tokens.empty()) {
    const std::vector<TokenId>& script = params_.scripted_tokens;
    return scripted_at_ < script.size() ? script[scripted_at_++]
                                        : end_token_.value_or(id);
  }
  if (grammar_ == nullptr || grammar_->Allows(id)) return id;
  // As llama.cpp: only a rejected pick pays for the mask, and the chain
  // (its random draw included) runs again over the allowed tokens.
  masked_.assign(logits.begin(), logits.end());
  if (!grammar_->Mask(masked_)) {
    grammar_error_ = grammar_->StuckError();
    return end_token_.value_or(id);
  }
  return RunChain(masked_);
}

TokenId Sampler::RunChain(std::span<const float> logits) {
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_[i] = {static_cast<TokenId>(i), Sanitize(logits[i]), 0.0f};
  }
  view_ = CandidateView{candidates_.data(), candidates_.size(), -1, false};
  for (const auto& stage : stages_) stage->Apply(&view_);
  KV_CHECK(view_.selected >= 0 &&
           static_cast<size_t>(view_.selected) < view_.size)
      << "no token selected among " << view_.size << " candidates";
  return view_.data[view_.selected].id;
}

void Sampler::Accept(TokenId token) {
  for (const auto& stage : stages_) stage->Accept(token);
}

void Sampler::AcceptGenerated(TokenId token) {
  Accept(token);
  if (grammar_ != nullptr) grammar_->Accept(token);
}

void Sampler::Reset() {
  for (const auto& stage : stages_) stage->Reset();
}

TokenProbs Sampler::PostSamplingProbs(size_t n) const {
  TokenProbs out;
  if (view_.data == nullptr || view_.selected < 0) return out;
  std::vector<Candidate> left(view_.data, view_.data + view_.size);
  size_t selected = static_cast<size_t>(view_.selected);
  if (!view_.sorted) {
    // llama-server re-sorts by probability (std::sort, unstable) and finds
    // the sampled token again by id.
    const TokenId id = left[selected].id;
    std::sort(left.begin(), left.end(), ByProbDesc);
    for (size_t i = 0; i < left.size(); ++i) {
      if (left[i].id == id) {
        selected = i;
        break;
      }
    }
  }
  out.chosen = left[selected].p;
  for (size_t i = 0; i < std::min(n, left.size()) && left[i].p != 0.0f; ++i) {
    out.top.push_back({left[i].id, left[i].p});
  }
  return out;
}

}  // namespace kvault
