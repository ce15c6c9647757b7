// The infill stage (llama.cpp's "infill" sampler, for fill-in-the-middle):
// prefers ending when end-of-generation tokens are likely enough, merges
// candidates whose text is a prefix of another's, and keeps the clearly
// likely ones. It leaves the draw to the dist stage after it.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "model/sampler_vocab.h"
#include "model/sampling_stages.h"

namespace kvault::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class InfillStage final : public Stage {
 public:
  explicit InfillStage(const SamplerVocab* vocab) : vocab_(vocab) {}

  void Apply(CandidateView* view) override {
    Softmax(view, true);
    float p_text = 0.0f;
    float p_eog = 0.0f;
    for (size_t i = 0; i < view->size; ++i) {
      const Candidate& c = view->data[i];
      (vocab_->IsEndOfGeneration(c.id) ? p_eog : p_text) += c.p;
    }
    if (3 * p_eog * view->size > p_text) {
      KeepEndOfGeneration(view);
      return;
    }
    MergePrefixes(view);
    size_t non_eog = 0;
    float mass = Keep(view, 0.2f, &non_eog);
    if (non_eog == 0) {
      // Nothing but endings is likely: end the infill.
      const std::optional<TokenId> end = vocab_->EndOfTurnOrSequence();
      KV_CHECK(end.has_value()) << "infill needs an EOT or EOS token";
      view->size = 1;
      view->data[0].id = *end;
      view->data[0].logit = 1.0f;
      return;
    }
    Normalize(view, mass);
    const float threshold = 1.0 / (non_eog + 1);
    mass = Keep(view, threshold, &non_eog);
    Normalize(view, mass);
  }

 private:
  // Keeps the end-of-generation candidates only, renormalized.
  void KeepEndOfGeneration(CandidateView* view) const {
    const size_t old_size = view->size;
    view->size = 0;
    float sum = 0.0f;
    for (size_t i = 0; i < old_size; ++i) {
      if (!vocab_->IsEndOfGeneration(view->data[i].id)) continue;
      sum += view->data[i].p;
      view->data[view->size++] = view->data[i];
    }
    for (size_t i = 0; i < view->size; ++i) view->data[i].p /= sum;
  }

  // A candidate whose text starts another's absorbs it (or is absorbed by
  // it, whichever is less likely): the pair's mass goes to one of them.
  void MergePrefixes(CandidateView* view) const {
    std::vector<std::string> pieces(view->size);  // [size]
    for (size_t i = 0; i < view->size; ++i) {
      pieces[i] = vocab_->Piece(view->data[i].id);
    }
    for (size_t i0 = 0; i0 < view->size; ++i0) {
      for (size_t i1 = 0; i1 < view->size; ++i1) {
        if (view->data[i0].logit == kNegInf) break;
        if (i0 == i1 || view->data[i1].logit == kNegInf) continue;
        const std::string& a = pieces[i0];
        const std::string& b = pieces[i1];
        if (a.empty() || a.size() > b.size() || b.compare(0, a.size(), a)) {
          continue;
        }
        size_t dst = i0;
        size_t src = i1;
        if (view->data[i1].p > view->data[i0].p) std::swap(dst, src);
        view->data[dst].p += view->data[src].p;
        view->data[src].logit = kNegInf;
        view->data[src].p = 0.0f;
      }
    }
  }

  static void Normalize(CandidateView* view, float mass) {
    for (size_t i = 0; i < view->size; ++i) view->data[i].p /= mass;
  }

  // Keeps candidates with p >= threshold and every end-of-generation one;
  // counts the kept others in *non_eog and returns the kept mass.
  float Keep(CandidateView* view, float threshold, size_t* non_eog) const {
    const size_t old_size = view->size;
    view->size = 0;
    *non_eog = 0;
    float sum = 0.0f;
    for (size_t i = 0; i < old_size; ++i) {
      const bool eog = vocab_->IsEndOfGeneration(view->data[i].id);
      if (view->data[i].p < threshold && !eog) continue;
      if (!eog) ++*non_eog;
      sum += view->data[i].p;
      view->data[view->size++] = view->data[i];
    }
    return sum;
  }

  const SamplerVocab* vocab_;
};

}  // namespace

std::unique_ptr<Stage> MakeInfill(const SamplerVocab* vocab) {
  KV_CHECK(vocab != nullptr) << "the infill sampler needs a vocabulary";
  return std::make_unique<InfillStage>(vocab);
}

}  // namespace kvault::sampling
