// The stages that consume random numbers: the final dist draw, XTC,
// Mirostat 1 and 2, adaptive-p. Each owns a std::mt19937 seeded with the
// request's 32-bit seed and draws through std::uniform_real_distribution
// or std::discrete_distribution, whose libstdc++ implementations define the
// exact stream llama-server produces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/check.h"
#include "model/sampling_stages.h"

namespace kvault::sampling {
namespace {

// llama.cpp's llama_sample_dist: std::discrete_distribution over the
// candidates' float probabilities, in view order.
int64_t DrawDiscrete(const CandidateView& view, std::mt19937* rng) {
  std::vector<float> weights(view.size);  // [size]
  for (size_t i = 0; i < view.size; ++i) weights[i] = view.data[i].p;
  std::discrete_distribution<int> dist(weights.begin(), weights.end());
  return dist(*rng);
}

// Both Mirostats end alike: draw from the list left, then move mu by the
// drawn token's surprise.
void DrawAndAdaptMu(CandidateView* view, std::mt19937* rng, float tau,
                    float eta, float* mu) {
  Softmax(view, true);
  const int64_t index = DrawDiscrete(*view, rng);
  view->selected = index;
  const float surprise = -std::log2(view->data[index].p);
  *mu = *mu - eta * (surprise - tau);
}

class DistStage final : public Stage {
 public:
  explicit DistStage(uint32_t seed) : seed_(seed), rng_(seed) {}

  void Apply(CandidateView* view) override {
    if (view->size == 0) {
      view->selected = -1;
      return;
    }
    view->selected = 0;
    std::uniform_real_distribution<double> uniform(0.0f, 1.0f);
    if (view->size == 1) {
      // Nothing to choose, but the draw still happens, so the stream
      // advances by the same amount at every step.
      uniform(rng_);
      view->data[0].p = 1.0f;
      return;
    }
    float max_logit = view->data[0].logit;
    if (!view->sorted) {
      for (size_t i = 1; i < view->size; ++i) {
        max_logit = std::max(max_logit, view->data[i].logit);
      }
    }
    // Unnormalized float weights summed in double; one uniform double picks
    // the first candidate whose running sum reaches sum * u, and the same
    // pass normalizes p.
    double sum = 0.0;
    for (size_t i = 0; i < view->size; ++i) {
      const float p = std::exp(view->data[i].logit - max_logit);
      view->data[i].p = p;
      sum += p;
    }
    const double target = sum * uniform(rng_);
    double running = 0.0;
    bool found = false;
    for (size_t i = 0; i < view->size; ++i) {
      if (!found) {
        running += view->data[i].p;
        if (running >= target) {
          view->selected = static_cast<int64_t>(i);
          found = true;
        }
      }
      view->data[i].p /= sum;
    }
    if (!found) view->selected = static_cast<int64_t>(view->size) - 1;
  }

  void Reset() override { rng_.seed(seed_); }

 private:
  uint32_t seed_;
  std::mt19937 rng_;
};

class XtcStage final : public Stage {
 public:
  XtcStage(float probability, float threshold, size_t min_keep, uint32_t seed)
      : probability_(probability),
        threshold_(threshold),
        min_keep_(min_keep),
        seed_(seed),
        rng_(seed) {}

  void Apply(CandidateView* view) override {
    if (probability_ <= 0.0f || threshold_ > 0.5f || view->size < 2) return;
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    if (uniform(rng_) > probability_) return;
    Softmax(view, true);
    // Cut every token above the threshold except the least likely of them.
    size_t last_above = 0;
    for (size_t i = 0; i < view->size; ++i) {
      if (view->data[i].p < threshold_) break;
      last_above = i;
    }
    if (view->size - last_above >= min_keep_ && last_above > 0) {
      view->data += last_above;
      view->size -= last_above;
    }
  }

  void Reset() override { rng_.seed(seed_); }

 private:
  float probability_;
  float threshold_;
  size_t min_keep_;
  uint32_t seed_;
  std::mt19937 rng_;
};

class MirostatStage final : public Stage {
 public:
  MirostatStage(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m)
      : n_vocab_(n_vocab),
        seed_(seed),
        tau_(tau),
        eta_(eta),
        m_(m),
        mu_(2.0f * tau),
        rng_(seed) {}

  void Apply(CandidateView* view) override {
    Softmax(view, true);
    const float n_vocab =
        static_cast<float>(n_vocab_ > 0 ? n_vocab_ : view->size);
    // Zipf exponent estimated from the m most likely tokens.
    float sum_ti_bi = 0.0f;
    float sum_ti_sq = 0.0f;
    for (size_t i = 0; i < static_cast<size_t>(m_ - 1) && i < view->size - 1;
         ++i) {
      const float t_i =
          std::log(static_cast<float>(i + 2) / static_cast<float>(i + 1));
      const float b_i = std::log(view->data[i].p / view->data[i + 1].p);
      sum_ti_bi += t_i * b_i;
      sum_ti_sq += t_i * t_i;
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;
    const float epsilon_hat = s_hat - 1;
    const float k = std::pow((epsilon_hat * std::pow(2.0f, mu_)) /
                                 (1 - std::pow(n_vocab, -epsilon_hat)),
                             1 / s_hat);
    TopK(view, std::max(TruncateToInt(k), 1));
    DrawAndAdaptMu(view, &rng_, tau_, eta_, &mu_);
  }

  void Reset() override {
    mu_ = 2.0f * tau_;
    rng_.seed(seed_);
  }

 private:
  int32_t n_vocab_;  // 0: the list's length at the first step
  uint32_t seed_;
  float tau_;
  float eta_;
  int32_t m_;
  float mu_;
  std::mt19937 rng_;
};

class MirostatV2Stage final : public Stage {
 public:
  MirostatV2Stage(uint32_t seed, float tau, float eta)
      : seed_(seed), tau_(tau), eta_(eta), mu_(2.0f * tau), rng_(seed) {}

  void Apply(CandidateView* view) override {
    Softmax(view, true);
    // Keep the leading run of tokens whose surprise is at most mu.
    size_t keep = 0;
    while (keep < view->size && !(-std::log2(view->data[keep].p) > mu_)) {
      ++keep;
    }
    view->size = std::max<size_t>(keep, 1);
    DrawAndAdaptMu(view, &rng_, tau_, eta_, &mu_);
  }

  void Reset() override {
    mu_ = 2.0f * tau_;
    rng_.seed(seed_);
  }

 private:
  uint32_t seed_;
  float tau_;
  float eta_;
  float mu_;
  std::mt19937 rng_;
};

// Adaptive-p: reshapes the distribution towards tokens whose probability is
// near a target that adapts to the probabilities of the tokens chosen so
// far (an exponential moving average), then draws.
class AdaptivePStage final : public Stage {
 public:
  AdaptivePStage(float target, float decay, uint32_t seed)
      : target_(target),
        decay_(std::clamp(decay, 0.0f, 0.99f)),
        seed_(seed),
        rng_(seed) {
    ResetAverage();
  }

  void Apply(CandidateView* view) override {
    Softmax(view, false);
    if (target_ < 0.0f) {  // off: a plain draw from the distribution
      view->selected = DrawDiscrete(*view, &rng_);
      return;
    }
    original_probs_.resize(view->size);
    for (size_t i = 0; i < view->size; ++i) {
      original_probs_[i] = view->data[i].p;
    }
    const float target = std::clamp(target_, 0.0f, 1.0f);
    const float adapted = std::clamp(
        total_weight_ == 0.0f ? target
                              : 2.0f * target - (weighted_sum_ / total_weight_),
        0.0f, 1.0f);
    for (size_t i = 0; i < view->size; ++i) {
      if (view->data[i].logit == -std::numeric_limits<float>::infinity()) {
        continue;  // masked tokens stay masked
      }
      const float dist = std::abs((view->data[i].p - adapted) * kInvWidth);
      view->data[i].logit =
          kPeakLogit - kSharpness * dist * dist / (1.0f + dist);
    }
    Softmax(view, false);
    const int64_t index = DrawDiscrete(*view, &rng_);
    view->selected = index;
    pending_token_ = view->data[index].id;
    pending_index_ = index;
  }

  void Accept(TokenId token) override {
    if (pending_index_ >= 0 && pending_token_ == token) {
      weighted_sum_ = original_probs_[pending_index_] + decay_ * weighted_sum_;
      total_weight_ = 1.0f + decay_ * total_weight_;
    }
    pending_index_ = -1;
  }

  void Reset() override {
    ResetAverage();
    rng_.seed(seed_);
  }

 private:
  // The shape of the transform: a peak logit at the target falling off
  // quadratically, then linearly, with the distance in units of kWidth.
  static constexpr float kWidth = 0.3f;
  static constexpr float kPeakLogit = 5.0f;
  static constexpr float kSharpness = 10.0f;
  static constexpr float kInvWidth = 1.0f / kWidth;

  void ResetAverage() {
    weighted_sum_ = target_ / (1.0f - decay_);
    total_weight_ = 1.0f / (1.0f - decay_);
    pending_index_ = -1;
  }

  float target_;
  float decay_;
  uint32_t seed_;
  std::mt19937 rng_;
  float weighted_sum_ = 0;
  float total_weight_ = 0;
  std::vector<float> original_probs_;  // the last step's, before reshaping
  TokenId pending_token_ = -1;
  int64_t pending_index_ = -1;  // into original_probs_; -1: none
};

}  // namespace

std::unique_ptr<Stage> MakeDist(uint32_t seed) {
  return std::make_unique<DistStage>(seed);
}

std::unique_ptr<Stage> MakeXtc(float probability, float threshold,
                               size_t min_keep, uint32_t seed) {
  if (probability <= 0.0f || threshold > 0.5f) return nullptr;
  return std::make_unique<XtcStage>(probability, threshold, min_keep, seed);
}

std::unique_ptr<Stage> MakeMirostat(int32_t n_vocab, uint32_t seed, float tau,
                                    float eta, int32_t m) {
  return std::make_unique<MirostatStage>(n_vocab, seed, tau, eta, m);
}

std::unique_ptr<Stage> MakeMirostatV2(uint32_t seed, float tau, float eta) {
  return std::make_unique<MirostatV2Stage>(seed, tau, eta);
}

std::unique_ptr<Stage> MakeAdaptiveP(float target, float decay, uint32_t seed) {
  return std::make_unique<AdaptivePStage>(target, decay, seed);
}

}  // namespace kvault::sampling
