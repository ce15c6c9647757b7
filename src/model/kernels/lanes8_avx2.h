// The transposes behind the AVX2 "8 rows in the lanes" kernels
// (q4_k_lanes_avx2.cc, q6_k_lanes_avx2.cc): dword j of 8 weight rows into
// the 8 int32 lanes of one ymm. Included only by files compiled with AVX2,
// so its inline functions never reach generic code (see kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_LANES8_AVX2_H_
#define KVAULT_MODEL_KERNELS_LANES8_AVX2_H_

#include <immintrin.h>

#include <cstddef>

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

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_LANES8_AVX2_H_
