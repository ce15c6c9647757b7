// The transposes and small helpers behind the AVX2 "8 rows in the lanes"
// kernels (q4_0, q2_k, q4_k, q6_k and k_lanes8_avx2.h's types): dword j of
// 8 weight rows into the 8 int32 lanes of one ymm. Included only by files
// compiled with AVX2, so its inline functions never reach generic code (see
// kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_LANES8_AVX2_H_
#define KVAULT_MODEL_KERNELS_LANES8_AVX2_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/kernels/kernel_table.h"

namespace kvault::kernels {

// out[j], lane r = dword j of the 32 bytes at p + r * row_bytes (j < 8),
// for rows r < num_rows (zeros for the others, which are not read).
inline __attribute__((always_inline)) void Transpose8x8Dwords(
    const std::byte* p, size_t row_bytes, int num_rows, __m256i out[8]) {
  __m256i t[8];  // t[2i], t[2i + 1]: rows 2i, 2i + 1 interleaved
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const auto load = [&](int r) {
      return r < num_rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                p + r * row_bytes))
                          : _mm256_setzero_si256();
    };
    const __m256i a = load(2 * i), b = load(2 * i + 1);
    t[2 * i] = _mm256_unpacklo_epi32(a, b);      // d0 d1 | d4 d5
    t[2 * i + 1] = _mm256_unpackhi_epi32(a, b);  // d2 d3 | d6 d7
  }
  __m256i u[8];  // u[4h + j]: dword j | dword j + 4 of rows 4h .. 4h + 3
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i* s = t + 4 * h;
    u[4 * h] = _mm256_unpacklo_epi64(s[0], s[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(s[0], s[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(s[1], s[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(s[1], s[3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// out[j], lane r = dword j of the 16 bytes at p + r * row_bytes (j < 4),
// rows as in Transpose8x8Dwords.
inline __attribute__((always_inline)) void Transpose8x4Dwords(
    const std::byte* p, size_t row_bytes, int num_rows, __m256i out[4]) {
  const auto load = [&](int r) {
    return r < num_rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                              p + r * row_bytes))
                        : _mm_setzero_si128();
  };
  __m256i t[4];  // rows 2i, 2i + 1 (low half) and 2i + 4, 2i + 5 (high)
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const __m256i a = _mm256_set_m128i(load(2 * i + 4), load(2 * i));
    const __m256i b = _mm256_set_m128i(load(2 * i + 5), load(2 * i + 1));
    t[2 * i] = _mm256_unpacklo_epi32(a, b);      // d0 d1
    t[2 * i + 1] = _mm256_unpackhi_epi32(a, b);  // d2 d3
  }
  out[0] = _mm256_unpacklo_epi64(t[0], t[2]);
  out[1] = _mm256_unpackhi_epi64(t[0], t[2]);
  out[2] = _mm256_unpacklo_epi64(t[1], t[3]);
  out[3] = _mm256_unpackhi_epi64(t[1], t[3]);
}

// An empty asm on an accumulator: GCC otherwise reassociates the chains of
// vpaddw / vpaddd in the lanes kernels into trees whose leaves (every
// vpmaddubsw of a chunk) are spilled to the stack, which measured ~3x
// slower.
inline __attribute__((always_inline)) void KeepChain(__m256i& v) {
  asm("" : "+x"(v));
}

// The dword at p in all 8 lanes.
inline __m256i BroadcastDword(const std::byte* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Lane r = the dword at p + r * row_bytes for rows r < num_rows (zeros for
// the others, which are not read). For the few head bytes of a block whose
// 16-byte neighbourhood may lie past the matrix; 7 * row_bytes < 2^31.
inline __m256i GatherDwords(const std::byte* p, size_t row_bytes,
                            int num_rows) {
  const __m256i r = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i offsets =
      _mm256_mullo_epi32(r, _mm256_set1_epi32(static_cast<int>(row_bytes)));
  const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(num_rows), r);
  return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                     reinterpret_cast<const int*>(p), offsets,
                                     valid, 1);
}

// The f16 pair [lo | hi << 16] of each lane as two float vectors.
inline void SplitHalves(__m256i pairs, __m256* lo, __m256* hi) {
  // Per 128-bit lane: the low halves of its 4 dwords, then the high ones.
  const __m256i split = _mm256_shuffle_epi8(
      pairs,
      _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                       1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __m256i halves = _mm256_permute4x64_epi64(split, 0xD8);
  *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
  *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
}

// Whether token t of `a` runs in DotOrder::kGemm.
inline bool IsGemm(const MatMulArgs& a, int64_t t) {
  return a.orders != nullptr && a.orders[t] == DotOrder::kGemm;
}

// y[t, r0 .. r0 + num_rows) = the first num_rows lanes of `y`.
inline void StoreLanes(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
                       __m256 y) {
  float* out = a.y + t * a.y_stride + r0;
  if (num_rows == 8) {
    _mm256_storeu_ps(out, y);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, y);
  std::memcpy(out, tmp, num_rows * sizeof(float));
}

// Each lane's int32 `v` (in int16 range) in both of its int16 halves.
inline __m256i BothHalves(__m256i v) {
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(v, 16));
}

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_LANES8_AVX2_H_
