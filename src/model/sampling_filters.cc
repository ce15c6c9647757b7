// The deterministic stages: logit bias, top-k, top-p, min-p, typical,
// top-n-sigma and the temperatures. Each mirrors llama.cpp's arithmetic
// (float where it uses float, double where it uses double) and its sorts.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "model/sampling_stages.h"

namespace kvault::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class LogitBiasStage final : public Stage {
 public:
  explicit LogitBiasStage(std::vector<LogitBias> biases)
      : biases_(std::move(biases)) {}

  void Apply(CandidateView* view) override {
    // The stage runs first, where index == id; a moved token is searched.
    std::vector<LogitBias> missing;
    for (const LogitBias& b : biases_) {
      const size_t index = static_cast<size_t>(b.token);
      if (b.token >= 0 && index < view->size &&
          view->data[index].id == b.token) {
        view->data[index].logit += b.bias;
      } else {
        missing.push_back(b);
      }
    }
    for (size_t i = 0; i < view->size && !missing.empty(); ++i) {
      for (const LogitBias& b : missing) {
        if (view->data[i].id == b.token) {
          view->data[i].logit += b.bias;
          break;
        }
      }
    }
  }

 private:
  std::vector<LogitBias> biases_;
};

class TopKStage final : public Stage {
 public:
  explicit TopKStage(int32_t k) : k_(k) {}
  void Apply(CandidateView* view) override { TopK(view, k_); }

 private:
  int32_t k_;
};

class TopPStage final : public Stage {
 public:
  TopPStage(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}

  void Apply(CandidateView* view) override {
    if (p_ >= 1.0f) return;
    Softmax(view, false);
    size_t k = view->size;
    const Candidate* ordered = view->data;
    // Large unsorted lists first sort only the best 256 (most requests stop
    // there) and sort everything only when the mass is not reached.
    if (!view->sorted && view->size > 1024) {
      k = std::min<size_t>(256, view->size);
      BucketPartialSort(*view, k, &scratch_);
      ordered = scratch_.data();
    } else if (!view->sorted) {
      PartialSortInPlace(view, k);
    }
    float mass = 0.0f;
    size_t keep = view->size;
    for (size_t i = 0; i < view->size; ++i) {
      mass += ordered[i].p;
      if (mass >= p_ && i + 1 >= min_keep_) {
        keep = i + 1;
        break;
      }
      if (!view->sorted && i == k - 1) {
        k = view->size;
        BucketPartialSort(*view, k, &scratch_);
        ordered = scratch_.data();
      }
    }
    if (!view->sorted) {
      std::copy(scratch_.begin(), scratch_.begin() + keep, view->data);
      view->sorted = true;
    }
    view->size = keep;
  }

 private:
  float p_;
  size_t min_keep_;
  std::vector<Candidate> scratch_;
};

class MinPStage final : public Stage {
 public:
  MinPStage(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}

  void Apply(CandidateView* view) override {
    if (p_ <= 0.0f || view->size == 0) return;
    if (!view->sorted && FilterUnsorted(view)) return;
    if (!view->sorted) PartialSortInPlace(view, view->size);
    const float min_logit = view->data[0].logit + std::log(p_);
    size_t i = 1;  // the best token always stays
    for (; i < view->size; ++i) {
      if (view->data[i].logit < min_logit && i >= min_keep_) break;
    }
    view->size = i;
  }

 private:
  // Keeps logits >= max + log(p) in place, order unchanged; false (and the
  // view untouched) when fewer than min_keep would stay.
  bool FilterUnsorted(CandidateView* view) {
    float max_logit = -FLT_MAX;
    for (size_t i = 0; i < view->size; ++i) {
      max_logit = std::max(max_logit, view->data[i].logit);
    }
    const float min_logit = max_logit + std::log(p_);
    kept_.clear();
    for (size_t i = 0; i < view->size; ++i) {
      if (view->data[i].logit >= min_logit) kept_.push_back(view->data[i]);
    }
    if (kept_.empty() || kept_.size() < min_keep_) return false;
    std::copy(kept_.begin(), kept_.end(), view->data);
    view->size = kept_.size();
    return true;
  }

  float p_;
  size_t min_keep_;
  std::vector<Candidate> kept_;
};

class TypicalStage final : public Stage {
 public:
  TypicalStage(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}

  void Apply(CandidateView* view) override {
    if (p_ >= 1.0f) return;
    Softmax(view, true);
    float entropy = 0.0f;
    for (size_t i = 0; i < view->size; ++i) {
      entropy += -view->data[i].p * std::log(view->data[i].p);
    }
    // Rank by how far each token's surprise is from the entropy.
    std::vector<float> distance(view->size);  // [size]
    for (size_t i = 0; i < view->size; ++i) {
      distance[i] = std::fabs(-std::log(view->data[i].p) - entropy);
    }
    std::vector<size_t> order(view->size);  // [size]
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&distance](size_t a, size_t b) {
      return distance[a] < distance[b];
    });
    float mass = 0.0f;
    size_t keep = order.size();
    for (size_t i = 0; i < order.size(); ++i) {
      mass += view->data[order[i]].p;
      if (mass > p_ && (min_keep_ == 0 || i >= min_keep_ - 1)) {
        keep = i + 1;
        break;
      }
    }
    std::vector<Candidate> kept(keep);  // [keep]
    for (size_t i = 0; i < keep; ++i) kept[i] = view->data[order[i]];
    std::copy(kept.begin(), kept.end(), view->data);
    view->size = keep;
    view->sorted = false;
  }

 private:
  float p_;
  size_t min_keep_;
};

class TopNSigmaStage final : public Stage {
 public:
  explicit TopNSigmaStage(float n) : n_(n) {}

  void Apply(CandidateView* view) override {
    if (n_ <= 0.0f || view->size <= 1) return;
    // Mean and standard deviation over the finite (not -inf) logits.
    float max_logit = view->data[0].logit;
    float sum = 0;
    size_t count = 0;
    for (size_t i = 0; i < view->size; ++i) {
      const float logit = view->data[i].logit;
      if (logit == kNegInf) continue;
      max_logit = std::max(max_logit, logit);
      sum += logit;
      ++count;
    }
    const float mean = count > 0 ? sum / count : 0;
    float squares = 0;
    for (size_t i = 0; i < view->size; ++i) {
      const float logit = view->data[i].logit;
      // pow(float, int) is computed in double, then added to a float.
      if (logit != kNegInf) squares += std::pow(logit - mean, 2);
    }
    const float sigma = count > 0 ? std::sqrt(squares / count) : 0;
    for (size_t i = 0; i < view->size; ++i) {
      if (view->data[i].logit < max_logit - (n_ * sigma)) {
        view->data[i].logit = kNegInf;
      }
    }
  }

 private:
  float n_;
};

class TemperatureStage final : public Stage {
 public:
  explicit TemperatureStage(float temp) : temp_(temp) {}
  void Apply(CandidateView* view) override { ScaleByTemperature(view, temp_); }

 private:
  float temp_;
};

class TemperatureExtStage final : public Stage {
 public:
  TemperatureExtStage(float temp, float delta, float exponent)
      : temp_(temp), delta_(delta), exponent_(exponent) {}

  void Apply(CandidateView* view) override {
    if (delta_ <= 0) {
      ScaleByTemperature(view, temp_);
      return;
    }
    if (view->size <= 1) return;
    const float min_temp = std::max(0.0f, temp_ - delta_);
    const float max_temp = temp_ + delta_;
    const float max_entropy = -std::log(1.0f / view->size);
    Softmax(view, true);
    float entropy = 0.0f;
    for (size_t i = 0; i < view->size; ++i) {
      const float p = view->data[i].p;
      if (p > 0.0f) entropy -= p * std::log(p);
    }
    const float normalized = entropy / max_entropy;
    const float dyn_temp =
        min_temp + (max_temp - min_temp) * std::pow(normalized, exponent_);
    ScaleByTemperature(view, dyn_temp);
    RecomputeProbabilities(view);
  }

 private:
  // llama.cpp recomputes p in double here (and leaves it unnormalized in
  // float until the division).
  static void RecomputeProbabilities(CandidateView* view) {
    const double max_logit = view->data[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < view->size; ++i) {
      const double p = std::exp(view->data[i].logit - max_logit);
      view->data[i].p = static_cast<float>(p);
      sum += p;
    }
    for (size_t i = 0; i < view->size; ++i) view->data[i].p /= sum;
  }

  float temp_;
  float delta_;
  float exponent_;
};

}  // namespace

std::unique_ptr<Stage> MakeLogitBias(std::vector<LogitBias> biases) {
  if (biases.empty()) return nullptr;
  return std::make_unique<LogitBiasStage>(std::move(biases));
}

std::unique_ptr<Stage> MakeTopK(int32_t k) {
  if (k <= 0) return nullptr;
  return std::make_unique<TopKStage>(k);
}

std::unique_ptr<Stage> MakeTopP(float p, size_t min_keep) {
  if (p >= 1.0f) return nullptr;
  return std::make_unique<TopPStage>(p, min_keep);
}

std::unique_ptr<Stage> MakeMinP(float p, size_t min_keep) {
  if (p <= 0.0f) return nullptr;
  return std::make_unique<MinPStage>(p, min_keep);
}

std::unique_ptr<Stage> MakeTypical(float p, size_t min_keep) {
  if (p >= 1.0f) return nullptr;
  return std::make_unique<TypicalStage>(p, min_keep);
}

std::unique_ptr<Stage> MakeTopNSigma(float n) {
  if (n <= 0.0f) return nullptr;
  return std::make_unique<TopNSigmaStage>(n);
}

std::unique_ptr<Stage> MakeTemperature(float temp) {
  if (temp == 1.0f) return nullptr;
  return std::make_unique<TemperatureStage>(temp);
}

std::unique_ptr<Stage> MakeTemperatureExt(float temp, float delta,
                                          float exponent) {
  if (temp == 1.0f && delta <= 0.0f) return nullptr;
  return std::make_unique<TemperatureExtStage>(temp, delta, exponent);
}

}  // namespace kvault::sampling
