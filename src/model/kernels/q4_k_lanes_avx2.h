// The core of the AVX2 Q4_K kernels with 8 rows in the lanes
// (q4_k_lanes_avx2.cc: prefill and kRows; q4_k_decode_avx2.cc: one token
// over kGroups16): a super-block's scales for 8 rows, and one super-block
// against up to 4 tokens in llama.cpp's repacked float orders. Included
// only by files compiled with AVX2, so its inline functions never reach
// generic code (see kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_Q4_K_LANES_AVX2_H_
#define KVAULT_MODEL_KERNELS_Q4_K_LANES_AVX2_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "model/kernels/kernel_table.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels::q4k_avx2 {

inline constexpr int kLanes = 8;       // rows per ymm
inline constexpr int kGroupRows = 16;  // rows of a kGroups16 group
inline constexpr int kUnits = 32;      // 4-byte units of a super-block's qs
inline constexpr int64_t kGroupSbBytes = kGroupRows * q4_k::kBytes;

static_assert(q4_k::kQs == 16, "dwords 0-3 are d, dmin and the scales");

// A super-block's scales for 8 rows.
struct SbScales {
  __m256i scale[8];    // lane r: row r's sub-block scale, both int16 halves
  __m256i minpair[4];  // lane r: int16 pair [min 2c, min 2c + 1]
  __m256 d;
  __m256 dmin;
};

// One token's super-block: its scale and the int16 pairs of 32-value
// block sums per chunk.
struct TokenSb {
  float d;
  int32_t sums[4];  // dword c: [bsum32 2c, bsum32 2c + 1] as int16
};

// The float accumulators of 8 rows for one token.
struct Acc {
  __m256 acc;
  __m256 accm;
};

// vpshufb control putting bytes `lo` and `hi` of each dword into its two
// int16 halves (zero-extended).
inline __m256i BytePairCtrl(int lo, int hi) {
  const auto dw = [&](int i) {
    return static_cast<int32_t>(static_cast<uint32_t>(4 * i + lo) | 0x8000u |
                                static_cast<uint32_t>(4 * i + hi) << 16 |
                                0x80000000u);
  };
  return _mm256_setr_epi32(dw(0), dw(1), dw(2), dw(3), dw(0), dw(1), dw(2),
                           dw(3));
}

// The scales of 8 rows from the super-block's first 4 dwords: head[0]
// lane r = row r's d | dmin, head[1..3] its 12 scale bytes.
inline __attribute__((always_inline)) void UnpackScales(const __m256i head[4],
                                                        SbScales* g) {
  SplitHalves(head[0], &g->d, &g->dmin);
  const __m256i low6 = _mm256_set1_epi32(0x3F3F3F3F);
  const __m256i low4 = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i low2 = _mm256_set1_epi32(0x03030303);
  const __m256i w0 = head[1], w1 = head[2], w2 = head[3];
  const __m256i sc[2] = {
      _mm256_and_si256(w0, low6),
      _mm256_or_si256(
          _mm256_and_si256(w2, low4),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), low2),
                            4))};
  const __m256i mn[2] = {
      _mm256_and_si256(w1, low6),
      _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi32(w2, 4), low4),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), low2),
                            4))};
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    g->scale[j] = _mm256_shuffle_epi8(sc[j / 4], BytePairCtrl(j % 4, j % 4));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const int b = 2 * (c % 2);
    g->minpair[c] = _mm256_shuffle_epi8(mn[c / 2], BytePairCtrl(b, b + 1));
  }
}

// lo[t], hi[t] = int16 pair sums of chunk c's low / high sub-block
// against token t's x values `xq[t]`.
template <int T, class Units>
inline __attribute__((always_inline)) void ChunkPairs(
    const Units& w, int c, const std::byte* const* xq, __m256i (&lo)[T],
    __m256i (&hi)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i wl = w.Lo(8 * c + k);
    const __m256i wh = w.Hi(8 * c + k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::byte* x = xq[t] + 64 * c + 4 * k;
      lo[t] =
          _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(wl, BroadcastDword(x)));
      hi[t] = _mm256_add_epi16(
          hi[t], _mm256_maddubs_epi16(wh, BroadcastDword(x + 32)));
      KeepChain(lo[t]);
      KeepChain(hi[t]);
    }
  }
}

// acc[t] (8 rows) += one super-block for tokens t < T: x values xq[t],
// their scale and sums tok[t], order gemm[t].
template <int T, class Units>
inline __attribute__((always_inline)) void StepSb(
    const Units& w, const SbScales& s, const std::byte* const* xq,
    const TokenSb* const* tok, const bool* gemm, Acc* const* acc) {
  __m256 dd[T], dm[T];
  __m256i sum[T], msum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256 dx = _mm256_set1_ps(tok[t]->d);
    dd[t] = _mm256_mul_ps(s.d, dx);
    dm[t] = _mm256_mul_ps(s.dmin, dx);
    sum[t] = msum[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 1
  for (int c = 0; c < 4; ++c) {
    __m256i lo[T], hi[T];
    ChunkPairs<T>(w, c, xq, lo, hi);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i sc =
          _mm256_add_epi32(_mm256_madd_epi16(lo[t], s.scale[2 * c]),
                           _mm256_madd_epi16(hi[t], s.scale[2 * c + 1]));
      const __m256i m =
          _mm256_madd_epi16(s.minpair[c], _mm256_set1_epi32(tok[t]->sums[c]));
      if (gemm[t]) {
        acc[t]->acc =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sc), dd[t], acc[t]->acc);
        acc[t]->accm =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), dm[t], acc[t]->accm);
      } else {
        sum[t] = _mm256_add_epi32(sum[t], sc);
        msum[t] = _mm256_add_epi32(msum[t], m);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    if (gemm[t]) continue;
    acc[t]->acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), dd[t], acc[t]->acc);
    acc[t]->accm =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]), dm[t], acc[t]->accm);
  }
}

// Token t's super-blocks of `a`: out[b] for b < cols / 256.
inline void PackTokenSbs(const MatMulArgs& a, int64_t t, TokenSb* out) {
  const int64_t nb = a.cols / kBlockK;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * q8_k::kBytes;
    std::memcpy(&out[b].d, xb + q8_k::kD, sizeof(float));
    const __m256i b16 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q8_k::kBsums));
    // |bsum16| <= 16 * 128, so the pair sums fit int16.
    const __m128i sums8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                                         _mm256_extracti128_si256(b16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].sums), sums8);
  }
}

// y[t, r0 .. r0 + num_rows) = acc - accm.
inline void StoreRows(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
                      const Acc& acc) {
  StoreLanes(a, t, r0, num_rows, _mm256_sub_ps(acc.acc, acc.accm));
}

}  // namespace kvault::kernels::q4k_avx2

#endif  // KVAULT_MODEL_KERNELS_Q4_K_LANES_AVX2_H_
