// The vector pieces both F16 attention paths share (attention_batched.cc:
// one query at a time; attention_tiled.cc: blocks of queries). Each does,
// per (query head, cell), attention.cc's float operations in its order:
// ggml_vec_dot_f16's order for q . k, the online softmax's terms with the
// C library's exp, and the fp16-rounded V accumulator of ggml's
// flash-attention kernel. Internal to src/model.
#ifndef KVAULT_MODEL_ATTENTION_SIMD_H_
#define KVAULT_MODEL_ATTENTION_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/float16.h"

#define KVAULT_ATTENTION_FAST 1
#define KV_AVX2 __attribute__((target("avx2,fma,f16c")))
// AVX2 code with 32 ymm registers, for machines whose kernel table is
// AVX-512's.
#define KV_AVX512VL __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

namespace kvault::attention_simd {

// Rounds each value to the nearest fp16 (ties to even), as attention.cc's
// RoundToHalf.
KV_AVX2 inline __m256 RoundHalf(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// x[i] = fp16-rounded x[i] for n (a multiple of 8) values.
KV_AVX2 inline void RoundHalfRow(float* x, uint32_t n) {
  for (uint32_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(x + i, RoundHalf(_mm256_loadu_ps(x + i)));
  }
}

// 8 values of a K or V row as f32: rows converted to f32 for a prefill, or
// fp16 rows read in place from the pool for a decode (exact conversion, so
// both give the same sums).
KV_AVX2 inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
KV_AVX2 inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float LoadOne(const float* p) { return *p; }
inline float LoadOne(const uint16_t* p) { return HalfToFloat(*p); }

// The value step of ggml_vec_dot_f16's SIMD loop: 32 (four 8-lane
// accumulators) in an AVX2 llama.cpp build, 64 (four 16-lane ones) in an
// AVX-512 build (kDot512; ggml_compat::DotF16 documents both orders).
template <bool kDot512>
inline constexpr uint32_t kDotStep = kDot512 ? 64 : 32;

// 8 lanes of ggml_vec_dot_f16's reduction over values [0, np) of a . b (np
// a multiple of kDotStep): the AVX2 order's r = (a0+a2)+(a1+a3); with
// kDot512, r's 16 lanes folded once, r_i + r_(i+8) (_mm512_reduce_add_ps's
// first level), each 16-lane accumulator held as two 8-lane ones.
template <bool kDot512, class T>
KV_AVX2 inline __m256 DotLanes(const T* a, const float* b, uint32_t np) {
  constexpr int kAcc = kDot512 ? 8 : 4;  // 8-lane accumulators
  __m256 acc[kAcc];
#pragma GCC unroll 8
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_setzero_ps();
  for (uint32_t i = 0; i < np; i += kDotStep<kDot512>) {
#pragma GCC unroll 8
    for (int j = 0; j < kAcc; ++j) {
      acc[j] = _mm256_fmadd_ps(Load8(a + i + 8 * j),
                               _mm256_loadu_ps(b + i + 8 * j), acc[j]);
    }
  }
  if constexpr (kDot512) {  // acc[2j]: lanes 0-7 of a_j, acc[2j+1]: 8-15
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]),
                                    _mm256_add_ps(acc[2], acc[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]),
                                    _mm256_add_ps(acc[3], acc[7]));
    return _mm256_add_ps(lo, hi);
  }
  return _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]),
                       _mm256_add_ps(acc[1], acc[3]));
}

// The last two levels of the reduction for four keys' sums (x0..x3 in
// each of t0..t3's 128-bit halves): [t0, t1, t2, t3] per half. AVX2
// builds pair (x0+x1)+(x2+x3) (two hadds), AVX-512 ones (x0+x2)+(x1+x3).
template <bool kDot512>
KV_AVX2 inline __m256 SumQuads(__m256 t0, __m256 t1, __m256 t2, __m256 t3) {
  if constexpr (kDot512) {
    const __m256 s01 = _mm256_add_ps(_mm256_shuffle_ps(t0, t1, 0x44),
                                     _mm256_shuffle_ps(t0, t1, 0xEE));
    const __m256 s23 = _mm256_add_ps(_mm256_shuffle_ps(t2, t3, 0x44),
                                     _mm256_shuffle_ps(t2, t3, 0xEE));
    return _mm256_hadd_ps(s01, s23);
  }
  return _mm256_hadd_ps(_mm256_hadd_ps(t0, t1), _mm256_hadd_ps(t2, t3));
}

// Returns k . q in ggml_vec_dot_f16's order (as ggml_compat::DotF16 for
// the build kDot512 names): the vector sums over whole steps, lanes lo+hi,
// the last two levels, then the tail (dk % kDotStep values) in double.
template <bool kDot512, class T>
KV_AVX2 inline float DotOne(const T* k, const float* q, uint32_t dk) {
  const uint32_t np = dk & ~(kDotStep<kDot512> - 1);
  const __m256 r = DotLanes<kDot512>(k, q, np);
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  if constexpr (kDot512) {
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));
  } else {
    t = _mm_hadd_ps(t, t);
    t = _mm_hadd_ps(t, t);
  }
  double sum = _mm_cvtss_f32(t);
  for (uint32_t i = np; i < dk; ++i) {
    sum += static_cast<double>(LoadOne(k + i) * q[i]);
  }
  return static_cast<float>(sum);
}

// scores[m * stride] = keys[m] . q for m < 8, dk a multiple of
// kDotStep: the same sums as DotOne, whose per-key horizontal reduction
// is done here for 8 keys at once with lane shuffles.
template <bool kDot512, class T>
KV_AVX2 inline void Dot8Keys(const T* const* keys, const float* q, uint32_t dk,
                             float* scores, size_t stride) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) r[m] = DotLanes<kDot512>(keys[m], q, dk);
  // t[p] = [lo + hi of key 2p | lo + hi of key 2p + 1].
  __m256 t[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[p] = _mm256_add_ps(_mm256_permute2f128_ps(r[2 * p], r[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(r[2 * p], r[2 * p + 1], 0x31));
  }
  // Lanes: keys 0, 2, 4, 6 | 1, 3, 5, 7.
  const __m256 h = SumQuads<kDot512>(t[0], t[1], t[2], t[3]);
  alignas(32) float out[8];
  _mm256_store_ps(out, h);
  constexpr int kKeyOfLane[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int l = 0; l < 8; ++l) scores[kKeyOfLane[l] * stride] = out[l];
}

// Dot8Keys for two queries at once (q0 and q1, scores0 / scores1): each K
// vector is loaded once for both (AVX2 order; the AVX-512 one's eight
// accumulators per key and query would not fit the registers, so it runs
// Dot8Keys twice). Every sum is Dot8Keys's.
template <bool kDot512, class T>
KV_AVX2 inline void Dot8Keys2(const T* const* keys, const float* q0,
                              const float* q1, uint32_t dk, float* scores0,
                              float* scores1) {
  if constexpr (kDot512) {
    Dot8Keys<true>(keys, q0, dk, scores0, 1);
    Dot8Keys<true>(keys, q1, dk, scores1, 1);
    return;
  }
  __m256 r[2][8];
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    __m256 a[2][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[0][j] = a[1][j] = _mm256_setzero_ps();
    for (uint32_t i = 0; i < dk; i += 32) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256 k = Load8(keys[m] + i + 8 * j);
        a[0][j] = _mm256_fmadd_ps(k, _mm256_loadu_ps(q0 + i + 8 * j), a[0][j]);
        a[1][j] = _mm256_fmadd_ps(k, _mm256_loadu_ps(q1 + i + 8 * j), a[1][j]);
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      r[h][m] = _mm256_add_ps(_mm256_add_ps(a[h][0], a[h][2]),
                              _mm256_add_ps(a[h][1], a[h][3]));
    }
  }
  constexpr int kKeyOfLane[8] = {0, 2, 4, 6, 1, 3, 5, 7};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256 t[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      t[p] = _mm256_add_ps(
          _mm256_permute2f128_ps(r[h][2 * p], r[h][2 * p + 1], 0x20),
          _mm256_permute2f128_ps(r[h][2 * p], r[h][2 * p + 1], 0x31));
    }
    const __m256 sums =
        _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
    alignas(32) float out[8];
    _mm256_store_ps(out, sums);
    float* scores = h == 0 ? scores0 : scores1;
    for (int l = 0; l < 8; ++l) scores[kKeyOfLane[l]] = out[l];
  }
}

// Fetches `row` (`bytes` long) into the L2 cache ahead of its use: the
// cells of a fragmented sequence sit anywhere in the pool, where the
// hardware prefetchers cannot follow. Into L2, not L1: the loops fetch
// dozens of cells ahead, more than L1's miss buffers hold (Zen 4,
// BM_AttentionDecode/0/4: 15.9 ms with T0 hints at these distances, 8.6
// ms with T1). No AVX2 target and always inlined: GCC takes an out-of-line
// function of prefetches alone for one without effects and deletes the
// calls, as it did GatherSlices's, which could not inline an AVX2 one.
template <class T>
__attribute__((always_inline)) inline void PrefetchRow(const T* row,
                                                       size_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

// Cells whose rows are fetched ahead of the loops that read them: far
// enough for a DRAM access to complete before the loop gets there.
constexpr uint32_t kPrefetchCells = 32;
// The V loops run one latency-bound chain step per cell (~4x slower per
// cell than the score loop), so they fetch further ahead in cells.
constexpr uint32_t kPrefetchVCells = 64;

// One cell's softmax terms for one head: the accumulator is first scaled
// by old_scale when rescale (a new running max), then gets weight * v.
struct CellTerms {
  float weight;
  float old_scale;
  bool rescale;
};

// The online softmax's running state of one query head.
struct SoftmaxState {
  float max = -INFINITY;
  float sum = 0.0f;
};

// Continues head state `st` over n cells' raw scores (raw[m * stride]) in
// cell order, as attention.cc does it (its sum fused, as llama.cpp's build
// fuses it), filling terms[0, n). The exps run as one ExpInPlace call over
// `scratch` ([n]): same values as one std::exp per cell.
void SoftmaxTermsRow(const float* raw, size_t stride, uint32_t n, float scale,
                     SoftmaxState* st, float* scratch, CellTerms* terms);

// SoftmaxTermsRow for two heads over the same n cells: head h's raw scores
// at raw + h * raw_stride (contiguous), state st[h], terms at terms + h *
// terms_stride; scratch holds 2 n. The two heads' serial chains (running
// max, fused sum) interleave, so the core overlaps them.
void SoftmaxTermsRows2(const float* raw, size_t raw_stride, uint32_t n,
                       float scale, SoftmaxState* st, float* scratch,
                       CellTerms* terms, size_t terms_stride);

// out[0, 8 kNv) = the fp16-rounded V accumulation over rows[0, n) ([dv]
// each), continuing from out's values, the accumulator held in registers:
// its chain (fma, round, round per cell) is the loop's critical path.
template <int kNv, class T>
KV_AVX2 void AccumulateV(const T* const* rows, uint32_t n,
                         const CellTerms* terms, float* out) {
  __m256 acc[kNv];
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) acc[d] = _mm256_loadu_ps(out + 8 * d);
  for (uint32_t m = 0; m < n; ++m) {
    if (m + kPrefetchVCells < n) {
      PrefetchRow(rows[m + kPrefetchVCells], sizeof(T) * 8 * kNv);
    }
    const T* vc = rows[m];
    const __m256 w = _mm256_set1_ps(terms[m].weight);
    if (terms[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        const __m256 a = RoundHalf(_mm256_mul_ps(acc[d], sc));
        acc[d] = RoundHalf(_mm256_fmadd_ps(w, Load8(vc + 8 * d), a));
      }
    } else {
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc[d] = RoundHalf(_mm256_fmadd_ps(w, Load8(vc + 8 * d), acc[d]));
      }
    }
  }
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) _mm256_storeu_ps(out + 8 * d, acc[d]);
}

// AccumulateV for two heads at once (same V rows, own terms and
// outputs): two independent chains per cell instead of one, so the core
// overlaps them. Each lane sees AccumulateV's operations (a rescale's
// RoundHalf(acc * old_scale) is only moved ahead of the fma), so the bits
// are the same. 2 x kNv accumulators need AVX-512VL's 32 registers.
template <int kNv, class T>
KV_AVX512VL void AccumulateV2(const T* const* rows, uint32_t n,
                              const CellTerms* terms0,
                              const CellTerms* terms1, float* out0,
                              float* out1) {
  __m256 acc0[kNv], acc1[kNv];
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) {
    acc0[d] = _mm256_loadu_ps(out0 + 8 * d);
    acc1[d] = _mm256_loadu_ps(out1 + 8 * d);
  }
  for (uint32_t m = 0; m < n; ++m) {
    if (m + kPrefetchVCells < n) {
      PrefetchRow(rows[m + kPrefetchVCells], sizeof(T) * 8 * kNv);
    }
    if (terms0[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms0[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc0[d] = RoundHalf(_mm256_mul_ps(acc0[d], sc));
      }
    }
    if (terms1[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms1[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc1[d] = RoundHalf(_mm256_mul_ps(acc1[d], sc));
      }
    }
    const T* vc = rows[m];
    const __m256 w0 = _mm256_set1_ps(terms0[m].weight);
    const __m256 w1 = _mm256_set1_ps(terms1[m].weight);
#pragma GCC unroll 16
    for (int d = 0; d < kNv; ++d) {
      const __m256 v = Load8(vc + 8 * d);
      acc0[d] = RoundHalf(_mm256_fmadd_ps(w0, v, acc0[d]));
      acc1[d] = RoundHalf(_mm256_fmadd_ps(w1, v, acc1[d]));
    }
  }
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) {
    _mm256_storeu_ps(out0 + 8 * d, acc0[d]);
    _mm256_storeu_ps(out1 + 8 * d, acc1[d]);
  }
}

#define KV_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

// GCC 12's avx512fintrin.h builds "undefined" vectors from self-initialised
// locals (__Y = __Y), which -Wuninitialized flags in every caller.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// RoundHalf for 16 values.
KV_AVX512 inline __m512 RoundHalf16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// AccumulateV of kRows heads at head size 64 over the same f32 V rows, in
// zmm registers (4 per head): the rows' chains are independent, so the
// core overlaps them, and each V vector is loaded once for all. Each lane
// sees AccumulateV's operations, so the bits are the same.
template <int kRows>
KV_AVX512 void AccumulateRows64(const float* const* rows, uint32_t n,
                                const CellTerms* const* terms,
                                float* const* out) {
  __m512 acc[kRows][4];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) acc[r][d] = _mm512_loadu_ps(out[r] + 16 * d);
  }
  for (uint32_t m = 0; m < n; ++m) {
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      if (!terms[r][m].rescale) continue;
      const __m512 sc = _mm512_set1_ps(terms[r][m].old_scale);
#pragma GCC unroll 4
      for (int d = 0; d < 4; ++d) {
        acc[r][d] = RoundHalf16(_mm512_mul_ps(acc[r][d], sc));
      }
    }
    __m512 v[4];
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) v[d] = _mm512_loadu_ps(rows[m] + 16 * d);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m512 w = _mm512_set1_ps(terms[r][m].weight);
#pragma GCC unroll 4
      for (int d = 0; d < 4; ++d) {
        acc[r][d] = RoundHalf16(_mm512_fmadd_ps(w, v[d], acc[r][d]));
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int d = 0; d < 4; ++d) _mm512_storeu_ps(out[r] + 16 * d, acc[r][d]);
  }
}

#pragma GCC diagnostic pop

// AccumulateV for any dv (a multiple of 8), the accumulator in out: per
// cell, on a rescale acc = round(acc * old_scale), then acc = round(fma(
// weight, v, acc)) — attention.cc's scale loop, RoundToHalf, AxpyF16 and
// RoundToHalf.
template <class T>
KV_AVX2 void AccumulateVAny(const T* const* rows, uint32_t dv, uint32_t n,
                            const CellTerms* terms, float* out) {
  for (uint32_t m = 0; m < n; ++m) {
    const __m256 w = _mm256_set1_ps(terms[m].weight);
    const __m256 s = _mm256_set1_ps(terms[m].old_scale);
    for (uint32_t d = 0; d < dv; d += 8) {
      __m256 acc = _mm256_loadu_ps(out + d);
      if (terms[m].rescale) acc = RoundHalf(_mm256_mul_ps(acc, s));
      _mm256_storeu_ps(out + d,
                       RoundHalf(_mm256_fmadd_ps(w, Load8(rows[m] + d), acc)));
    }
  }
}

// Continues the V accumulations of heads [0, n_gqa) over rows[0, n):
// head j's accumulator is out + j * out_stride ([dv]), its terms
// terms + j * terms_stride. Two heads at a time where AVX-512VL's
// registers allow it.
template <class T>
KV_AVX2 void AccumulateHeads(const T* const* rows, uint32_t n, uint32_t n_gqa,
                             uint32_t dv, bool two_at_once,
                             const CellTerms* terms, size_t terms_stride,
                             float* out, size_t out_stride) {
  uint32_t j = 0;
  if (dv == 64 && two_at_once) {
    for (; j + 2 <= n_gqa; j += 2) {
      AccumulateV2<8>(rows, n, terms + j * terms_stride,
                      terms + (j + 1) * terms_stride, out + j * out_stride,
                      out + (j + 1) * out_stride);
    }
  }
  for (; j < n_gqa; ++j) {
    const CellTerms* head_terms = terms + j * terms_stride;
    float* head_out = out + j * out_stride;
    if (dv == 64) {
      AccumulateV<8>(rows, n, head_terms, head_out);
    } else if (dv == 128) {
      AccumulateV<16>(rows, n, head_terms, head_out);
    } else {
      AccumulateVAny(rows, dv, n, head_terms, head_out);
    }
  }
}

// out[0, dv) *= 1 / sum (0 when no cell was visible).
inline void Normalize(float sum, uint32_t dv, float* out) {
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (uint32_t d = 0; d < dv; ++d) out[d] *= inv;
}

}  // namespace kvault::attention_simd

#endif  // x86-64 GCC
#endif  // KVAULT_MODEL_ATTENTION_SIMD_H_
