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

KV_AVX2 void SoftmaxTermsRows2(const float* raw, size_t raw_stride,
                               uint32_t n, float scale, SoftmaxState* st,
                               float* scratch, CellTerms* terms,
                               size_t terms_stride) {
  float max[2] = {st[0].max, st[1].max};
  CellTerms* t[2] = {terms, terms + terms_stride};
  for (uint32_t m = 0; m < n; ++m) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const float score = raw[h * raw_stride + m] * scale;
      const bool rescale = score > max[h];
      t[h][m].rescale = rescale;
      scratch[h * n + m] = rescale ? max[h] - score : score - max[h];
      if (rescale) max[h] = score;
    }
  }
  ExpInPlace(scratch, 2 * size_t{n});
  float sum[2] = {st[0].sum, st[1].sum};
  for (uint32_t m = 0; m < n; ++m) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      CellTerms& c = t[h][m];
      const float e = scratch[h * n + m];
      c.weight = c.rescale ? 1.0f : e;
      c.old_scale = c.rescale ? e : 1.0f;
      sum[h] = std::fma(sum[h], c.old_scale, c.weight);
    }
  }
  for (int h = 0; h < 2; ++h) st[h] = {max[h], sum[h]};
}

}  // namespace kvault::attention_simd
#endif  // KVAULT_ATTENTION_FAST
