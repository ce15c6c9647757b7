// Helpers for the sampler stage tests: a candidate row built from logits or
// probabilities, and readers of what a stage left in it.
#ifndef KVAULT_TESTS_MODEL_SAMPLING_TEST_UTIL_H_
#define KVAULT_TESTS_MODEL_SAMPLING_TEST_UTIL_H_

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/sampler_vocab.h"
#include "model/sampling_candidates.h"

namespace kvault::sampling {

// Candidates with ids 0..n-1 and a view over all of them, unsorted.
struct Row {
  explicit Row(const std::vector<float>& logits) {
    for (size_t i = 0; i < logits.size(); ++i) {
      data.push_back({static_cast<TokenId>(i), logits[i], 0.0f});
    }
    view = CandidateView{data.data(), data.size(), -1, false};
  }
  std::vector<Candidate> data;
  CandidateView view;
};

// Logits whose softmax is `probs` (up to rounding).
inline std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// The ids left in the view, in view order.
inline std::vector<TokenId> Ids(const CandidateView& view) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i < view.size; ++i) ids.push_back(view.data[i].id);
  return ids;
}

// A vocabulary given as token texts; Tokenize matches the longest token
// text at each position (enough for the breaker tails the tests use).
class FakeVocab final : public SamplerVocab {
 public:
  explicit FakeVocab(std::vector<std::string> texts)
      : texts_(std::move(texts)) {}
  size_t size() const override { return texts_.size(); }
  std::string TokenText(TokenId id) const override { return texts_[id]; }
  std::vector<TokenId> Tokenize(std::string_view text) const override {
    std::vector<TokenId> ids;
    while (!text.empty()) {
      size_t best_len = 0;
      TokenId best = 0;
      for (size_t id = 0; id < texts_.size(); ++id) {
        const std::string& t = texts_[id];
        if (!t.empty() && t.size() > best_len && text.starts_with(t)) {
          best_len = t.size();
          best = static_cast<TokenId>(id);
        }
      }
      if (best_len == 0) break;  // not representable: stop
      ids.push_back(best);
      text.remove_prefix(best_len);
    }
    return ids;
  }
  std::string Piece(TokenId id) const override { return texts_[id]; }
  bool IsEndOfGeneration(TokenId id) const override { return id == eog_; }
  std::optional<TokenId> EndOfTurnOrSequence() const override { return eog_; }

  void set_eog(TokenId id) { eog_ = id; }

 private:
  std::vector<std::string> texts_;
  TokenId eog_ = -1;
};

}  // namespace kvault::sampling

#endif  // KVAULT_TESTS_MODEL_SAMPLING_TEST_UTIL_H_
