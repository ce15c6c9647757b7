// AVX-512 score kernels for the tiled prefill (attention_tiled.cc). They
// give DotOne's bits (attention_simd.h) in either build's order; for an
// AVX2 build's: ggml_vec_dot_f16's four ymm
// accumulators a0..a3 over 32-value steps, then ((r0+r4)+(r1+r5)) +
// ((r2+r6)+(r3+r7)) of r = (a0+a2)+(a1+a3). A zmm accumulator holds two of
// the ymm ones (lanes 0-7 a0 or a2, 8-15 a1 or a3: the same products in
// the same order), so a key costs half the fmas; and 16 keys' reductions
// run as one butterfly whose every add pairs the lanes DotOne pairs.
// Internal to src/model.
#ifndef KVAULT_MODEL_ATTENTION_SIMD512_H_
#define KVAULT_MODEL_ATTENTION_SIMD512_H_

#include "model/attention_simd.h"

#ifdef KVAULT_ATTENTION_FAST
// GCC 12's avx512fintrin.h builds "undefined" vectors from self-initialised
// locals (__Y = __Y), which -Wuninitialized flags in every caller.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace kvault::attention_simd {

#define KV_AVX512_INLINE \
  __attribute__((target("avx512f,avx512vl,avx2,fma,f16c"), always_inline))

// AVX2 order (kDot512 false): lanes 0-7 a0+a2, lanes 8-15 a1+a3 of
// DotLanes(k, q, kDk) (the last add, r = (a0+a2)+(a1+a3), is the
// butterfly's first level). AVX-512 order: the 16 lanes of r =
// (a0+a2)+(a1+a3) of its four zmm accumulators over 64-value steps (the
// first level then folds r_i + r_(i+8), as _mm512_reduce_add_ps does).
template <bool kDot512, uint32_t kDk>
KV_AVX512_INLINE inline __m512 PairSums(const float* k, const float* q) {
  if constexpr (kDot512) {
    static_assert(kDk % 64 == 0);
    __m512 a[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[j] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (uint32_t i = 0; i < kDk; i += 64) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16 * j),
                               _mm512_loadu_ps(q + i + 16 * j), a[j]);
      }
    }
    return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
  }
  __m512 a01 = _mm512_setzero_ps(), a23 = a01;
#pragma GCC unroll 8
  for (uint32_t i = 0; i < kDk; i += 32) {
    a01 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), _mm512_loadu_ps(q + i), a01);
    a23 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16),
                          _mm512_loadu_ps(q + i + 16), a23);
  }
  return _mm512_add_ps(a01, a23);
}

// Level 1 of the butterfly, keys x and y: [r of x | r of y], r_i = lane i
// + lane i + 8.
KV_AVX512_INLINE inline __m512 Level1(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44),   // blocks 0 1 0 1
                       _mm512_shuffle_f32x4(x, y, 0xEE));  // blocks 2 3 2 3
}

// Level 2, over two Level1 results (keys 4b..4b+3): block j holds key j's
// t_i = r_i + r_(i+4), i < 4.
KV_AVX512_INLINE inline __m512 Level2(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88),   // blocks 0 2 0 2
                       _mm512_shuffle_f32x4(x, y, 0xDD));  // blocks 1 3 1 3
}

// Level 3 of the AVX-512 order: within each 128-bit block, [x0+x2, x1+x3,
// y0+y2, y1+y3] (level 4 is then PairAdjacent's).
KV_AVX512_INLINE inline __m512 PairStrided(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44),   // x0 x1 y0 y1
                       _mm512_shuffle_ps(x, y, 0xEE));  // x2 x3 y2 y3
}

// Levels 3 and 4 (hadd's pairs): within each 128-bit block, [x0+x1,
// x2+x3, y0+y1, y2+y3].
KV_AVX512_INLINE inline __m512 PairAdjacent(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88),   // x0 x2 y0 y2
                       _mm512_shuffle_ps(x, y, 0xDD));  // x1 x3 y1 y3
}

// Levels 1-2 of keys[0, 4) for queries q0 and q1 (each K vector loaded
// once for both): out[h] is query h's Level2 result.
template <bool kDot512, uint32_t kDk>
KV_AVX512_INLINE inline void Reduce4Keys(const float* const* keys,
                                         const float* q0, const float* q1,
                                         __m512* out) {
  const __m512 x0 = Level1(PairSums<kDot512, kDk>(keys[0], q0),
                           PairSums<kDot512, kDk>(keys[1], q0));
  const __m512 x1 = Level1(PairSums<kDot512, kDk>(keys[0], q1),
                           PairSums<kDot512, kDk>(keys[1], q1));
  const __m512 y0 = Level1(PairSums<kDot512, kDk>(keys[2], q0),
                           PairSums<kDot512, kDk>(keys[3], q0));
  const __m512 y1 = Level1(PairSums<kDot512, kDk>(keys[2], q1),
                           PairSums<kDot512, kDk>(keys[3], q1));
  out[0] = Level2(x0, y0);
  out[1] = Level2(x1, y1);
}

// scores0[m] = DotOne<kDot512>(keys[m], q0, kDk) and scores1[m] =
// DotOne<kDot512>(keys[m], q1, kDk) for m < 16, kDk a multiple of
// kDotStep<kDot512>, bit for bit.
template <bool kDot512, uint32_t kDk>
__attribute__((target("avx512f,avx512vl,avx2,fma,f16c"))) inline void
Dot16Keys2(const float* const* keys, const float* q0, const float* q1,
           float* scores0, float* scores1) {
  __m512 l2[4][2];
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    Reduce4Keys<kDot512, kDk>(keys + 4 * b, q0, q1, l2[b]);
  }
  // After levels 3 and 4, lane 4b + j holds key b + 4j.
  const __m512i key_order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512 sums = kDot512
                            ? PairAdjacent(PairStrided(l2[0][h], l2[1][h]),
                                           PairStrided(l2[2][h], l2[3][h]))
                            : PairAdjacent(PairAdjacent(l2[0][h], l2[1][h]),
                                           PairAdjacent(l2[2][h], l2[3][h]));
    _mm512_storeu_ps(h == 0 ? scores0 : scores1,
                     _mm512_permutexvar_ps(key_order, sums));
  }
}

// SoftmaxTermsRows2 (attention_simd.h) for `rows` (1, 2 or 4) rows of n
// <= 64 cells on an AVX-512 machine (scratch: rows x n), same bits: the
// running max is a prefix max (exact, so any grouping gives the scalar
// pass's values up to the sign of a zero max, which changes no flag and
// no exp), 16 cells per step; only the fused sums stay serial chains, the
// rows' chains interleaved.
void SoftmaxTermsRowsWide(int rows, const float* raw, size_t raw_stride,
                          uint32_t n, float scale, SoftmaxState* st,
                          float* scratch, CellTerms* terms,
                          size_t terms_stride);

}  // namespace kvault::attention_simd
#pragma GCC diagnostic pop
#endif  // KVAULT_ATTENTION_FAST

#endif  // KVAULT_MODEL_ATTENTION_SIMD512_H_
