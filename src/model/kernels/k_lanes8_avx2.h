// The AVX2 K-quant MatMul driver with 8 weight rows in the 8 int32 lanes
// of a ymm (q2_k, q3_k, q5_k, q6_k and iq4_xs _lanes_avx2.cc). A type `K`
// supplies its block (Pack: one super-block of 8 rows transposed from the
// file's rows into units), its accumulators and steps, and its one-token
// kernel; this header tiles rows and tokens: prefill unpacks each 8-row
// super-block once per chunk of tokens (tiles of 4), so the unpack is
// shared; decode runs K::DecodeRows, a row at a time (one sequential
// stream, no transpose).
//
// Lanes8Type<K> holds the steps of the types whose scalar reference is
// DotKLanes8 (quant_scalar.cc: Q3_K, Q5_K, Q6_K, IQ4_XS). Per row and
// super-block, 8 exact int32 lanes: lane m = values 32c + 4m .. + 3 of
// every 32-value chunk c times their 16-value group's scale (plus the
// type's lane term, Q6_K's offset), then acc[m] = fma(d * dx, lane m,
// acc[m]), and at the end ggml's 8-way sum of acc (plus Q5_K's min term,
// summed in a scalar per row). Here unit 8c + m holds, in lane r, row r's
// four values 32c + 4m .. + 3: one vpmaddubsw against the broadcast x
// dword (unsigned values; signed ones as |q| against sign(x, q), |q| <=
// 127 so |127 * 128 * 2| < 32768) and one vpmaddwd against the group
// scale as int16 give each row's lane-m contribution, so every row runs
// the scalar float sequence bit for bit. Included only by files compiled
// with AVX2 (see kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_K_LANES8_AVX2_H_
#define KVAULT_MODEL_KERNELS_K_LANES8_AVX2_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/kernels/kernel_table.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels::klanes8 {

inline constexpr int kLanes = 8;   // rows per ymm
inline constexpr int kUnits = 64;  // 4-value units per super-block
inline constexpr int kTokenTile = 4;
inline constexpr int64_t kXChunkBytes = 256 * 1024;  // x kept hot in L2
inline constexpr int64_t kMaxChunkTokens = 256;
inline constexpr int64_t kPrefetchSbs = 2;  // super-blocks ahead

// The float accumulators of 8 rows for one token: acc[m] per lane m, and
// the rows' scalar min sums (Q5_K).
struct Acc {
  __m256 acc[8];
  __m256 summs;
};

inline __m256i Load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline float FloatAt(const std::byte* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Decode: register c (values 32c .. + 31) of a row's super-block gets
// group scale 2c in lanes 0-3 and 2c + 1 in lanes 4-7: int16 k = 2 (c % 4)
// and k + 1 of `src` (8 group scales as int16, in both 128-bit lanes).
inline __m256i RegScales(__m256i src, int c) {
  const int8_t k = static_cast<int8_t>(2 * (c % 4));
  const int8_t lo0 = 2 * k, lo1 = 2 * k + 1, hi0 = 2 * k + 2, hi1 = 2 * k + 3;
  return _mm256_shuffle_epi8(
      src,
      _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0,
                       lo1, lo0, lo1, lo0, lo1, hi0, hi1, hi0, hi1, hi0, hi1,
                       hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1));
}

// Decode: lanes += (register q . register x) times the scales `s`; signed
// types multiply |q| with sign(x, q).
template <bool kSigned>
inline __attribute__((always_inline)) void AddReg(__m256i q, __m256i x,
                                                  __m256i s, __m256i& lanes) {
  const __m256i p16 = kSigned ? _mm256_maddubs_epi16(_mm256_sign_epi8(q, q),
                                                     _mm256_sign_epi8(x, q))
                              : _mm256_maddubs_epi16(q, x);
  lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(p16, s));
  KeepChain(lanes);
}

// acc[t] (8 rows) += the super-block `w` for tokens t < T, whose Q8_K
// blocks are at xb[t].
template <class K, int T>
inline __attribute__((always_inline)) void StepSb(const typename K::Sb& w,
                                                  const std::byte* const* xb,
                                                  Acc* const* acc) {
  __m256 dd[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    dd[t] = _mm256_mul_ps(w.d, _mm256_set1_ps(FloatAt(xb[t] + q8_k::kD)));
  }
#pragma GCC unroll 1
  for (int m = 0; m < 8; ++m) {
    __m256i lane[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) lane[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i q = w.q[8 * c + m];
      const __m256i s = w.scale[2 * c + m / 4];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        __m256i x = BroadcastDword(xb[t] + q8_k::kQs + 32 * c + 4 * m);
        if constexpr (K::kSigned) x = _mm256_sign_epi8(x, w.sign[8 * c + m]);
        lane[t] = _mm256_add_epi32(
            lane[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), s));
        KeepChain(lane[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      lane[t] = K::LaneTerm(w, m, xb[t], lane[t]);
      acc[t]->acc[m] =
          _mm256_fmadd_ps(dd[t], _mm256_cvtepi32_ps(lane[t]), acc[t]->acc[m]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) K::BlockTerm(w, xb[t], acc[t]);
}

// The DotKLanes8 half of a type K: its accumulators, its steps and its
// stores; K (deriving from Lanes8Type<K>) adds Sb, Pack and DecodeRow, and
// may replace LaneTerm and BlockTerm.
template <class K>
struct Lanes8Type {
  using Acc = klanes8::Acc;
  static constexpr bool kMins = false;

  static Acc Zero() {
    Acc zero;
    for (__m256& v : zero.acc) v = _mm256_setzero_ps();
    zero.summs = _mm256_setzero_ps();
    return zero;
  }
  template <int T, class Sb>  // (K is incomplete here: Sb deduced)
  static void Step(const Sb& w, const std::byte* const* xb,
                   const bool* /*gemm: one order*/, Acc* const* acc) {
    StepSb<K, T>(w, xb, acc);
  }
  // y[t, r0 .. r0 + num_rows) = ggml's 8-way sum of acc (+ summs).
  static void Store(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
                    const Acc& acc) {
    const __m256* v = acc.acc;
    __m256 y = _mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
        _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
    // Only where the scalar adds it: + 0.0f would turn -0.0f into +0.0f.
    if constexpr (K::kMins) y = _mm256_add_ps(y, acc.summs);
    kernels::StoreLanes(a, t, r0, num_rows, y);
  }
  template <class Sb>
  static __m256i LaneTerm(const Sb&, int, const std::byte*, __m256i lane) {
    return lane;
  }
  template <class Sb>
  static void BlockTerm(const Sb&, const std::byte*, Acc*) {}
  // One token, a row at a time (one sequential stream, no transpose).
  static void DecodeRows(const MatMulArgs& a, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      a.y[r] = K::DecodeRow(a.w + r * a.w_row_bytes, a.x, a.cols / kBlockK);
    }
  }
};

// Tokens [tc, te) of `a` against super-block b, acc[t - tc].
template <class K>
void StepTokens(const MatMulArgs& a, const typename K::Sb& w, int64_t tc,
                int64_t te, int64_t b, typename K::Acc* acc) {
  int64_t t = tc;
  for (; t + kTokenTile <= te; t += kTokenTile) {
    const std::byte* xb[kTokenTile];
    typename K::Acc* ac[kTokenTile];
    bool gemm[kTokenTile];
    for (int i = 0; i < kTokenTile; ++i) {
      xb[i] = a.x + (t + i) * a.x_row_bytes + b * q8_k::kBytes;
      ac[i] = acc + (t + i - tc);
      gemm[i] = IsGemm(a, t + i);
    }
    K::template Step<kTokenTile>(w, xb, gemm, ac);
  }
  for (; t < te; ++t) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * q8_k::kBytes;
    typename K::Acc* ac = acc + (t - tc);
    const bool gemm = IsGemm(a, t);
    K::template Step<1>(w, &xb, &gemm, &ac);
  }
}

// Rows [r0, r0 + num_rows) (num_rows <= 8) for tokens [tc, te).
template <class K>
void RowsTokens(const MatMulArgs& a, int64_t r0, int num_rows, int64_t tc,
                int64_t te, typename K::Acc* acc, typename K::Sb* w) {
  const int64_t nb = a.cols / kBlockK;
  const std::byte* rows = a.w + r0 * a.w_row_bytes;
  std::fill(acc, acc + (te - tc), K::Zero());
  for (int64_t b = 0; b < nb; ++b) {
    if (b + kPrefetchSbs < nb) {  // 8 row streams: help the prefetchers
      const char* ahead =
          reinterpret_cast<const char*>(rows + (b + kPrefetchSbs) * K::kBytes);
      for (int r = 0; r < num_rows; ++r) {
        for (int line = 0; line < K::kBytes; line += 64) {
          _mm_prefetch(ahead + r * a.w_row_bytes + line, _MM_HINT_T0);
        }
      }
    }
    K::Pack(rows + b * K::kBytes, a.w_row_bytes, num_rows, w);
    StepTokens<K>(a, *w, tc, te, b, acc);
  }
  for (int64_t t = tc; t < te; ++t) {
    K::Store(a, t, r0, num_rows, acc[t - tc]);
  }
}

// The MatMulRowsFn of type K: rows [row_begin, row_end) of `a`.
template <class K>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    K::DecodeRows(a, row_begin, row_end);
    return;
  }
  int64_t chunk = kXChunkBytes / static_cast<int64_t>(a.x_row_bytes);
  chunk = std::clamp<int64_t>(chunk / kTokenTile * kTokenTile, kTokenTile,
                              kMaxChunkTokens);
  thread_local std::vector<typename K::Acc> acc;
  thread_local std::vector<typename K::Sb> w(1);
  acc.resize(chunk);
  for (int64_t tc = 0; tc < a.num_tokens; tc += chunk) {
    const int64_t te = std::min(tc + chunk, a.num_tokens);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kLanes) {
      const int rows =
          static_cast<int>(std::min<int64_t>(kLanes, row_end - r0));
      RowsTokens<K>(a, r0, rows, tc, te, acc.data(), w.data());
    }
  }
}

}  // namespace kvault::kernels::klanes8

#endif  // KVAULT_MODEL_KERNELS_K_LANES8_AVX2_H_
