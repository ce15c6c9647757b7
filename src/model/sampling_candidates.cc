#include "model/sampling_candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace kvault::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending logit, nothing else: ties keep whatever order the algorithm
// leaves, exactly as llama.cpp's comparator does.
bool ByLogitDesc(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit;
}

// The bucket histogram's geometry: 128 buckets over logits [-10, 10), the
// index computed in float as scale * logit + offset.
constexpr int kNumBuckets = 128;
constexpr float kBucketLow = -10.0f;
constexpr float kBucketHigh = 10.0f;
constexpr float kBucketScale = kNumBuckets / (kBucketHigh - kBucketLow);
constexpr float kBucketOffset = -kBucketLow * kBucketScale;

int BucketOf(float logit) {
  const int index = TruncateToInt(kBucketScale * logit + kBucketOffset);
  return std::clamp(index, 0, kNumBuckets - 1);
}

}  // namespace

int32_t TruncateToInt(float value) {
  // 2^31 is exactly representable; anything at or beyond it (or NaN) is
  // what cvttss2si turns into INT32_MIN.
  if (value >= -2147483648.0f && value < 2147483648.0f) {
    return static_cast<int32_t>(value);
  }
  return std::numeric_limits<int32_t>::min();
}

void BucketPartialSort(const CandidateView& view, size_t npartial,
                       std::vector<Candidate>* out) {
  KV_CHECK(npartial > 0 && npartial <= view.size);
  std::vector<int> bucket_of(view.size);    // [size]
  std::vector<int> counts(kNumBuckets, 0);  // [kNumBuckets]
  for (size_t i = 0; i < view.size; ++i) {
    bucket_of[i] = BucketOf(view.data[i].logit);
    ++counts[bucket_of[i]];
  }
  // The lowest bucket that, with all above it, holds npartial candidates.
  int low = kNumBuckets - 1;
  size_t kept = 0;
  for (; low >= 0; --low) {
    kept += counts[low];
    if (kept >= npartial) break;
  }
  out->resize(kept);
  // Scatter the kept candidates bucket by bucket, highest bucket first,
  // each bucket in view order.
  std::vector<Candidate*> next(kNumBuckets, nullptr);  // [kNumBuckets]
  Candidate* cursor = out->data();
  for (int b = kNumBuckets - 1; b >= low; --b) {
    next[b] = cursor;
    cursor += counts[b];
  }
  for (size_t i = 0; i < view.size; ++i) {
    if (bucket_of[i] >= low) *next[bucket_of[i]]++ = view.data[i];
  }
  // Buckets above `low` are wholly kept: sort each; the lowest kept bucket
  // only needs its best npartial - done entries.
  cursor = out->data();
  size_t done = 0;
  for (int b = kNumBuckets - 1; b > low; --b) {
    std::sort(cursor, cursor + counts[b], ByLogitDesc);
    cursor += counts[b];
    done += counts[b];
  }
  std::partial_sort(cursor, cursor + (npartial - done), cursor + counts[low],
                    ByLogitDesc);
}

void PartialSortInPlace(CandidateView* view, size_t npartial) {
  KV_CHECK(npartial <= view->size);
  if (npartial <= 128) {
    std::partial_sort(view->data, view->data + npartial,
                      view->data + view->size, ByLogitDesc);
  } else {
    std::vector<Candidate> sorted;
    BucketPartialSort(*view, npartial, &sorted);
    std::copy(sorted.begin(), sorted.begin() + npartial, view->data);
  }
  view->size = npartial;
  view->sorted = true;
}

void Softmax(CandidateView* view, bool sort) {
  KV_CHECK(view->size > 0);
  if (sort && !view->sorted) PartialSortInPlace(view, view->size);
  float max_logit = view->data[0].logit;
  if (!view->sorted) {
    for (size_t i = 1; i < view->size; ++i) {
      max_logit = std::max(max_logit, view->data[i].logit);
    }
  }
  float sum = 0.0f;
  for (size_t i = 0; i < view->size; ++i) {
    const float p = std::exp(view->data[i].logit - max_logit);
    view->data[i].p = p;
    sum += p;
  }
  for (size_t i = 0; i < view->size; ++i) view->data[i].p /= sum;
}

void TopK(CandidateView* view, int32_t k) {
  if (k <= 0) return;
  const size_t keep = std::min(static_cast<size_t>(k), view->size);
  if (!view->sorted) PartialSortInPlace(view, keep);
  view->size = keep;
}

void ScaleByTemperature(CandidateView* view, float temp) {
  if (temp > 0.0f) {
    for (size_t i = 0; i < view->size; ++i) view->data[i].logit /= temp;
    return;
  }
  if (view->size == 0) return;
  // Greedy: one pass that keeps the running maximum and masks the rest.
  size_t best = 0;
  float best_logit = view->data[0].logit;
  for (size_t i = 1; i < view->size; ++i) {
    if (view->data[i].logit > best_logit) {
      view->data[best].logit = kNegInf;
      best = i;
      best_logit = view->data[i].logit;
    } else {
      view->data[i].logit = kNegInf;
    }
  }
}

}  // namespace kvault::sampling
