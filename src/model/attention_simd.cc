#include "model/attention_simd.h"

#include "model/attention_simd512.h"

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

namespace {

// x shifted up `lanes` lanes (1, 2, 4 or 8), `fill` in the lanes below.
template <int kLanes>
KV_AVX512 inline __m512 ShiftUp(__m512 x, __m512 fill) {
  return _mm512_castsi512_ps(_mm512_alignr_epi32(
      _mm512_castps_si512(x), _mm512_castps_si512(fill), 16 - kLanes));
}

// The max pass of SoftmaxTermsRow over raw[0, n) (contiguous, n <= 64):
// exp arguments into args, weights' rescale flags into the bits of
// rescale[n / 16]; returns the new running max.
KV_AVX512 float MaxPass(const float* raw, uint32_t n, float scale, float max,
                        float* args, uint16_t* rescale) {
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  for (uint32_t m = 0; m < n; m += 16) {
    const __mmask16 valid =
        n - m >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - m)) - 1);
    const __m512 x = _mm512_mask_mov_ps(
        neg_inf, valid,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, raw + m),
                      _mm512_set1_ps(scale)));
    __m512 p = _mm512_max_ps(x, ShiftUp<1>(x, neg_inf));
    p = _mm512_max_ps(p, ShiftUp<2>(p, neg_inf));
    p = _mm512_max_ps(p, ShiftUp<4>(p, neg_inf));
    p = _mm512_max_ps(p, ShiftUp<8>(p, neg_inf));
    const __m512 carry = _mm512_set1_ps(max);
    p = _mm512_max_ps(p, carry);
    const __m512 before = ShiftUp<1>(p, carry);  // the max before each cell
    const __mmask16 up = _mm512_cmp_ps_mask(x, before, _CMP_GT_OQ) & valid;
    const __m512 arg = _mm512_mask_sub_ps(_mm512_sub_ps(x, before), up,
                                          before, x);
    _mm512_mask_storeu_ps(args + m, valid, arg);
    rescale[m / 16] = up;
    max = _mm512_cvtss_f32(_mm512_permutexvar_ps(_mm512_set1_epi32(15), p));
  }
  return max;
}

// SoftmaxTermsRowsWide for kRows rows: the max passes one row at a time,
// one exp call, then the rows' fused-sum chains interleaved (one fma per
// cell and row, each chain waiting on its own fma's latency only).
template <int kRows>
KV_AVX512 void SoftmaxRows(const float* raw, size_t raw_stride, uint32_t n,
                           float scale, SoftmaxState* st, float* scratch,
                           CellTerms* terms, size_t terms_stride) {
  uint16_t up[kRows][4];
  float max[kRows], sum[kRows];
  for (int h = 0; h < kRows; ++h) {
    max[h] = MaxPass(raw + h * raw_stride, n, scale, st[h].max,
                     scratch + h * n, up[h]);
    sum[h] = st[h].sum;
  }
  ExpInPlace(scratch, kRows * size_t{n});
  for (uint32_t m = 0; m < n; ++m) {
#pragma GCC unroll 4
    for (int h = 0; h < kRows; ++h) {
      const bool rescale = (up[h][m / 16] >> (m % 16)) & 1;
      const float e = scratch[h * n + m];
      CellTerms& c = terms[h * terms_stride + m];
      c = {rescale ? 1.0f : e, rescale ? e : 1.0f, rescale};
      sum[h] = std::fma(sum[h], c.old_scale, c.weight);
    }
  }
  for (int h = 0; h < kRows; ++h) st[h] = {max[h], sum[h]};
}

}  // namespace

void SoftmaxTermsRowsWide(int rows, const float* raw, size_t raw_stride,
                          uint32_t n, float scale, SoftmaxState* st,
                          float* scratch, CellTerms* terms,
                          size_t terms_stride) {
  switch (rows) {
    case 4:
      return SoftmaxRows<4>(raw, raw_stride, n, scale, st, scratch, terms,
                            terms_stride);
    case 2:
      return SoftmaxRows<2>(raw, raw_stride, n, scale, st, scratch, terms,
                            terms_stride);
    default:
      return SoftmaxRows<1>(raw, raw_stride, n, scale, st, scratch, terms,
                            terms_stride);
  }
}

}  // namespace kvault::attention_simd
#endif  // KVAULT_ATTENTION_FAST
