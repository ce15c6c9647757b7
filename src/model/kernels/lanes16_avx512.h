// The transpose behind the "16 rows in the lanes" kernels
// (q4_0_lanes_avx512.cc, q4_k_lanes_avx512.cc). Included only by files
// compiled with AVX-512, so its inline functions never reach generic code.
#ifndef KVAULT_MODEL_KERNELS_LANES16_AVX512_H_
#define KVAULT_MODEL_KERNELS_LANES16_AVX512_H_

#include <immintrin.h>

#include <cstddef>

namespace kvault::kernels {

// out[j], lane r = dword j of the 16 bytes at p + r * row_bytes, for rows
// r < num_rows (zeros for the others, which are not read).
inline __attribute__((always_inline)) void Transpose16x4Dwords(
    const std::byte* p, size_t row_bytes, int num_rows, __m512i out[4]) {
  __m512i z[4];  // z[g]: rows 4g .. 4g + 3, one per 128-bit quarter
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const auto load = [&](int r) {
      return r < num_rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                p + r * row_bytes))
                          : _mm_setzero_si128();
    };
    z[g] = _mm512_inserti32x4(
        _mm512_inserti32x4(
            _mm512_inserti32x4(_mm512_castsi128_si512(load(4 * g)),
                               load(4 * g + 1), 1),
            load(4 * g + 2), 2),
        load(4 * g + 3), 3);
    // -> [D0 of the 4 rows | D1 | D2 | D3]
    z[g] = _mm512_permutexvar_epi32(
        _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0),
        z[g]);
  }
  // 4x4 transpose of quarters: out[j] quarter g = z[g] quarter j.
  const __m512i s01_lo = _mm512_shuffle_i32x4(z[0], z[1], 0x44);
  const __m512i s01_hi = _mm512_shuffle_i32x4(z[0], z[1], 0xEE);
  const __m512i s23_lo = _mm512_shuffle_i32x4(z[2], z[3], 0x44);
  const __m512i s23_hi = _mm512_shuffle_i32x4(z[2], z[3], 0xEE);
  out[0] = _mm512_shuffle_i32x4(s01_lo, s23_lo, 0x88);
  out[1] = _mm512_shuffle_i32x4(s01_lo, s23_lo, 0xDD);
  out[2] = _mm512_shuffle_i32x4(s01_hi, s23_hi, 0x88);
  out[3] = _mm512_shuffle_i32x4(s01_hi, s23_hi, 0xDD);
}

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_LANES16_AVX512_H_
