#include "model/attention_simd.h"

#include "model/exact_exp.h"

#ifdef KVAULT_ATTENTION_FAST
namespace kvault::attention_simd {

// Two passes: the running max (a serial chain of compares) yields every
// exp argument, then one vector exp call, then the fused sum chain. The
// arguments and the order of the sum are those of a pass that calls
// std::exp per cell, and ExpInPlace returns std::exp's bits.
KV_AVX2 void SoftmaxTermsRow(const float* raw, size_t stride, uint32_t n,
                             float scale, SoftmaxState* st, float* scratch,
                             CellTerms* terms) {
  float max = st->max;
  for (uint32_t m = 0; m < n; ++m) {
    const float score = raw[m * stride] * scale;
    const bool rescale = score > max;
    terms[m].rescale = rescale;
    scratch[m] = rescale ? max - score : score - max;
    if (rescale) max = score;
  }
  ExpInPlace(scratch, n);
  float sum = st->sum;
  for (uint32_t m = 0; m < n; ++m) {
    CellTerms& c = terms[m];
    c.weight = c.rescale ? 1.0f : scratch[m];
    c.old_scale = c.rescale ? scratch[m] : 1.0f;
    sum = std::fma(sum, c.old_scale, c.weight);
  }
  st->max = max;
  st->sum = sum;
}

}  // namespace kvault::attention_simd
#endif  // KVAULT_ATTENTION_FAST
