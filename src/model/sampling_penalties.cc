// The stages that look at the accepted tokens: the repetition penalties
// (repeat, frequency, presence) and DRY.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>

#include "model/sampler_vocab.h"
#include "model/sampling_stages.h"

namespace kvault::sampling {
namespace {

class PenaltiesStage final : public Stage {
 public:
  PenaltiesStage(int32_t last_n, float repeat, float freq, float present)
      : last_n_(static_cast<size_t>(last_n)),
        repeat_(repeat),
        freq_(freq),
        present_(present) {}

  void Apply(CandidateView* view) override {
    for (size_t i = 0; i < view->size; ++i) {
      Candidate& c = view->data[i];
      const auto it = counts_.find(c.id);
      if (it == counts_.end()) continue;
      const int count = it->second;
      // Dividing a negative logit would raise it: those are multiplied.
      if (c.logit <= 0) {
        c.logit *= repeat_;
      } else {
        c.logit /= repeat_;
      }
      c.logit -= static_cast<float>(count) * freq_ +
                 static_cast<float>(count > 0) * present_;
    }
    view->sorted = false;
  }

  void Accept(TokenId token) override {
    ++counts_[token];
    if (window_.size() >= last_n_) {
      const TokenId oldest = window_.front();
      window_.pop_front();
      if (--counts_[oldest] == 0) counts_.erase(oldest);
    }
    window_.push_back(token);
  }

  void Reset() override {
    window_.clear();
    counts_.clear();
  }

 private:
  size_t last_n_;
  float repeat_;
  float freq_;
  float present_;
  std::deque<TokenId> window_;               // the last last_n_ tokens
  std::unordered_map<TokenId, int> counts_;  // occurrences in window_
};

// A sequence breaker's tokens after its first ("head") token, by head.
using BreakerTails = std::map<TokenId, std::vector<std::vector<TokenId>>>;

// Adds `tail` under `head` unless it is there already.
void AddTail(TokenId head, std::vector<TokenId> tail, BreakerTails* out) {
  std::vector<std::vector<TokenId>>& tails = (*out)[head];
  if (std::find(tails.begin(), tails.end(), tail) == tails.end()) {
    tails.push_back(std::move(tail));
  }
}

// Every way a token can start `breaker`: a token whose text contains it is
// a breaker on its own (empty tail); a token whose text ends with a prefix
// of it is a head whose tail is the rest of the breaker, tokenized (at
// most kMaxTailTokens tokens).
void AddBreaker(const SamplerVocab& vocab, const std::string& breaker,
                BreakerTails* out) {
  constexpr size_t kMaxTailTokens = 20;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const TokenId token = static_cast<TokenId>(id);
    const std::string text = vocab.TokenText(token);
    if (text.find(breaker) != std::string::npos) {
      AddTail(token, {}, out);
      continue;
    }
    for (size_t pos = text.find(breaker[0]); pos != std::string::npos;
         pos = text.find(breaker[0], pos + 1)) {
      size_t matched = 1;
      bool match = true;
      for (; matched < breaker.size() && pos + matched < text.size();
           ++matched) {
        if (text[pos + matched] != breaker[matched]) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      std::vector<TokenId> tail = vocab.Tokenize(breaker.substr(matched));
      if (tail.size() > kMaxTailTokens) tail.resize(kMaxTailTokens);
      AddTail(token, std::move(tail), out);
    }
  }
}

// The last `capacity` accepted tokens, read backwards: At(0) is the newest.
class TokenRing {
 public:
  explicit TokenRing(size_t capacity) : capacity_(capacity) {}
  void Push(TokenId token) {
    if (capacity_ == 0) return;
    if (tokens_.size() == capacity_) tokens_.pop_front();
    tokens_.push_back(token);
  }
  TokenId At(size_t back) const { return tokens_[tokens_.size() - 1 - back]; }
  size_t size() const { return tokens_.size(); }
  void Clear() { tokens_.clear(); }

 private:
  size_t capacity_;
  std::deque<TokenId> tokens_;
};

class DryStage final : public Stage {
 public:
  DryStage(const DryConfig& config, BreakerTails breakers)
      : config_(config),
        breakers_(std::move(breakers)),
        history_(static_cast<size_t>(EffectiveLastN(config))) {}

  void Apply(CandidateView* view) override;
  void Accept(TokenId token) override { history_.Push(token); }
  void Reset() override { history_.Clear(); }

  static int32_t EffectiveLastN(const DryConfig& c) {
    return c.penalty_last_n == -1 ? c.n_ctx_train
                                  : std::max(c.penalty_last_n, 0);
  }

 private:
  int RepeatLimit(int window) const;
  void CountRepeats(int window, int limit);
  void Penalize(CandidateView* view) const;

  DryConfig config_;
  BreakerTails breakers_;
  TokenRing history_;
  std::vector<int> repeat_count_;                // [window], reused
  std::unordered_map<TokenId, int> max_repeat_;  // token -> longest repeat
};

// Returns how long a repeat may be before the most recent sequence breaker
// in the window (the window itself when there is none).
int DryStage::RepeatLimit(int window) const {
  for (int i = 0; i < window; ++i) {
    const auto it = breakers_.find(history_.At(i));
    if (it == breakers_.end()) continue;
    int longest = -1;
    for (const std::vector<TokenId>& tail : it->second) {
      const int len = static_cast<int>(tail.size());
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int k = 0; k < len && match; ++k) {
        match = tail[k] == history_.At(i - k - 1);
      }
      if (match) longest = len;
    }
    if (longest >= 0) return i - longest;
  }
  return window;
}

// repeat_count_[window - 1 - k]: how many tokens ending k tokens back
// repeat the window's last tokens (a Z-algorithm run backwards), capped at
// `limit`.
void DryStage::CountRepeats(int window, int limit) {
  repeat_count_.assign(window, 0);
  const int last = window - 1;
  int rt = 0;
  int lt = 0;
  for (int k = 1; k < window; ++k) {
    if (k > rt) {
      int n = 0;
      while (n + k < window && history_.At(n) == history_.At(n + k)) ++n;
      repeat_count_[last - k] = std::min(n, limit);
      if (n > 0) {
        lt = k;
        rt = k + n - 1;
      }
      continue;
    }
    const int pair = k - lt;
    const int right_len = rt - k + 1;
    if (repeat_count_[last - pair] < right_len) {
      repeat_count_[last - k] = std::min(repeat_count_[last - pair], limit);
      continue;
    }
    int i = rt + 1;
    while (i < window && history_.At(i) == history_.At(i - k)) ++i;
    repeat_count_[last - k] = std::min(i - k, limit);
    lt = k;
    rt = i - 1;
  }
}

void DryStage::Apply(CandidateView* view) {
  const int window = std::min(
      std::min(static_cast<int>(history_.size()), EffectiveLastN(config_)),
      config_.n_ctx_train);
  if (window <= config_.allowed_length) return;
  const int limit = RepeatLimit(window);
  if (limit < config_.allowed_length) return;
  CountRepeats(window, limit);
  // The token after each long enough repeat would extend it.
  max_repeat_.clear();
  for (int i = 0; i < window - 1; ++i) {
    const int len = repeat_count_[i];
    if (len < config_.allowed_length) continue;
    const TokenId next = history_.At(window - 2 - i);
    const auto it = max_repeat_.find(next);
    if (it == max_repeat_.end() || it->second < len) max_repeat_[next] = len;
  }
  Penalize(view);
  view->sorted = false;
}

void DryStage::Penalize(CandidateView* view) const {
  // pow(base, exponent) must stay below FLT_MAX: the exponent is capped at
  // log(FLT_MAX) / log(base).
  constexpr float kLogFloatMax = 88.7228391f;
  int max_exponent = 0;
  if (config_.base > 1.000001f) {
    max_exponent = static_cast<int>(kLogFloatMax / std::log(config_.base));
  }
  for (size_t i = 0; i < view->size; ++i) {
    Candidate& c = view->data[i];
    const auto it = max_repeat_.find(c.id);
    if (it == max_repeat_.end()) continue;
    // A token that is a whole sequence breaker on its own is never
    // penalized.
    const auto heads = breakers_.find(c.id);
    if (heads != breakers_.end() &&
        std::any_of(heads->second.begin(), heads->second.end(),
                    [](const auto& tail) { return tail.empty(); })) {
      continue;
    }
    int exponent = it->second - config_.allowed_length;
    if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
    // pow(float, int) is computed in double, the product rounded to float.
    const float penalty = static_cast<float>(config_.multiplier *
                                             std::pow(config_.base, exponent));
    c.logit -= penalty;
  }
}

}  // namespace

std::unique_ptr<Stage> MakePenalties(int32_t last_n, float repeat, float freq,
                                     float present) {
  last_n = std::max(last_n, 0);
  if (last_n == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) {
    return nullptr;
  }
  return std::make_unique<PenaltiesStage>(last_n, repeat, freq, present);
}

std::unique_ptr<Stage> MakeDry(const DryConfig& config,
                               const SamplerVocab* vocab) {
  if (config.multiplier == 0.0f || config.base < 1.0f ||
      config.penalty_last_n == 0) {
    return nullptr;
  }
  constexpr size_t kMaxBreakerBytes = 40;
  BreakerTails breakers;
  for (size_t i = 0; vocab != nullptr && i < config.breakers.size(); ++i) {
    std::string breaker = config.breakers[i];
    if (breaker.empty()) continue;  // llama.cpp skips these with a warning
    if (breaker.size() > kMaxBreakerBytes) breaker.resize(kMaxBreakerBytes);
    AddBreaker(*vocab, breaker, &breakers);
  }
  return std::make_unique<DryStage>(config, std::move(breakers));
}

}  // namespace kvault::sampling
