// The candidate list the sampler chain works on, and the sorting and
// softmax helpers the samplers share.
//
// Reproducing llama.cpp's choices bit for bit needs more than the same
// formulas: the candidates' order decides float summation orders and which
// of equal logits a filter keeps, so every helper here performs the same
// sequence of standard-library sorts (same comparators, same ranges) and
// the same float/double operations as llama.cpp's sampler code. The
// standard library is the same (libstdc++ of GCC 12, which llama.cpp's
// reference build uses too), so equal inputs give equal permutations.
#ifndef KVAULT_MODEL_SAMPLING_CANDIDATES_H_
#define KVAULT_MODEL_SAMPLING_CANDIDATES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/kv_types.h"

namespace kvault::sampling {

// One candidate token (the layout of llama_token_data).
struct Candidate {
  TokenId id;
  float logit;
  float p;  // probability, valid after a softmax
};

// A window onto candidates (llama_token_data_array): samplers may shrink
// it, move its start forward (XTC) or reorder it.
struct CandidateView {
  Candidate* data = nullptr;
  size_t size = 0;
  int64_t selected = -1;  // index of the chosen token, once a draw ran
  bool sorted = false;    // data is in descending logit order
};

// Sorts the `npartial` largest logits of `view` to its front, descending,
// and shrinks it to them; sets sorted. Precondition: npartial <= size.
void PartialSortInPlace(CandidateView* view, size_t npartial);

// Writes into `out` at least `npartial` candidates of `view` whose first
// `npartial` are its largest logits in descending order (a 128-bucket
// histogram first, then sorts inside the top buckets); `view` is unchanged.
// Precondition: 0 < npartial <= size.
void BucketPartialSort(const CandidateView& view, size_t npartial,
                       std::vector<Candidate>* out);

// Fills p with the softmax of the logits (float arithmetic), sorting first
// when `sort` and the view is not sorted yet. Precondition: size > 0.
void Softmax(CandidateView* view, bool sort);

// Keeps the k best candidates (sorting them when not sorted); k <= 0 keeps
// all.
void TopK(CandidateView* view, int32_t k);

// Divides the logits by `temp`; temp <= 0 keeps the first largest logit and
// sets all the others to -inf (the list keeps its length).
void ScaleByTemperature(CandidateView* view, float temp);

// Returns (int)value the way x86's truncating conversion does: INT32_MIN for
// NaN and values outside int's range (where the C++ cast is undefined).
int32_t TruncateToInt(float value);

}  // namespace kvault::sampling

#endif  // KVAULT_MODEL_SAMPLING_CANDIDATES_H_
