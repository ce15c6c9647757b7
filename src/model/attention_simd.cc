#include "model/attention_simd.h"

#include <algorithm>
#include <cstddef>

#include "model/attention_simd512.h"
#include "model/exact_exp.h"

// GCC 12's avx512fintrin.h builds "undefined" vectors from self-initialised
// locals (__Y = __Y), which -Wuninitialized flags in every caller.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

// Lane l of interleaved store j (of 3) holds float 16 j + l of 16
// CellTerms: field (16 j + l) % 3 of cell (16 j + l) / 3. kTermsIndex:
// the permutex2var index picking it from (weights, old scales); its low 4
// bits pick the cell's rescale flag. kFlagLanes: the lanes that are flags.
struct TermsLayout {
  int32_t index[3][16];
  uint16_t flag_lanes[3];
};
constexpr TermsLayout MakeTermsLayout() {
  TermsLayout t{};
  for (int k = 0; k < 48; ++k) {
    t.index[k / 16][k % 16] = (k % 3 == 1 ? 16 : 0) + k / 3;
    if (k % 3 == 2) t.flag_lanes[k / 16] |= uint16_t(1u << (k % 16));
  }
  return t;
}
constexpr TermsLayout kTermsLayout = MakeTermsLayout();

// out[0, count) (count <= 16) = {w, o, up} of each cell: three
// interleaving stores instead of three scalar stores per cell.
KV_AVX512 inline void StoreTerms(__m512 w, __m512 o, __mmask16 up,
                                 uint32_t count, CellTerms* out) {
  static_assert(sizeof(CellTerms) == 12 && offsetof(CellTerms, weight) == 0 &&
                offsetof(CellTerms, old_scale) == 4 &&
                offsetof(CellTerms, rescale) == 8);
  // A flag lane stores 1 or 0 as a 32-bit int: the bool and its padding.
  const __m512 flags = _mm512_castsi512_ps(
      _mm512_maskz_mov_epi32(up, _mm512_set1_epi32(1)));
  float* dst = reinterpret_cast<float*>(out);
  for (uint32_t j = 0; j < 3 && 16 * j < 3 * count; ++j) {
    const __m512i index = _mm512_loadu_si512(kTermsLayout.index[j]);
    const __m512 v = _mm512_mask_blend_ps(
        kTermsLayout.flag_lanes[j], _mm512_permutex2var_ps(w, index, o),
        _mm512_permutexvar_ps(index, flags));
    const uint32_t floats = std::min(16u, 3 * count - 16 * j);
    _mm512_mask_storeu_ps(dst + 16 * j,
                          static_cast<__mmask16>((1u << floats) - 1), v);
  }
}

// SoftmaxTermsRowsWide for kRows rows: per row the max pass and, after
// one exp call, the terms 16 cells per step; then the rows' fused-sum
// chains interleaved (one fma per cell and row, each chain waiting on its
// own fma's latency only).
template <int kRows>
KV_AVX512 void SoftmaxRows(const float* raw, size_t raw_stride, uint32_t n,
                           float scale, SoftmaxState* st, float* scratch,
                           CellTerms* terms, size_t terms_stride) {
  uint16_t up[kRows][4];
  float max[kRows], sum[kRows], olds[kRows][64];
  for (int h = 0; h < kRows; ++h) {
    max[h] = MaxPass(raw + h * raw_stride, n, scale, st[h].max,
                     scratch + h * n, up[h]);
    sum[h] = st[h].sum;
  }
  ExpInPlace(scratch, kRows * size_t{n});
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int h = 0; h < kRows; ++h) {
    for (uint32_t m = 0; m < n; m += 16) {
      const uint32_t count = std::min(16u, n - m);
      const __mmask16 valid = static_cast<__mmask16>((1u << count) - 1);
      const __m512 e = _mm512_maskz_loadu_ps(valid, scratch + h * n + m);
      const __mmask16 u = up[h][m / 16];
      const __m512 w = _mm512_mask_mov_ps(e, u, one);  // weight
      const __m512 o = _mm512_mask_mov_ps(one, u, e);  // old_scale
      StoreTerms(w, o, u, count, terms + h * terms_stride + m);
      _mm512_mask_storeu_ps(scratch + h * n + m, valid, w);
      _mm512_mask_storeu_ps(&olds[h][m], valid, o);
    }
  }
  for (uint32_t m = 0; m < n; ++m) {
#pragma GCC unroll 4
    for (int h = 0; h < kRows; ++h) {
      sum[h] = std::fma(sum[h], olds[h][m], scratch[h * n + m]);
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
