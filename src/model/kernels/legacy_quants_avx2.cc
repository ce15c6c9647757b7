// AVX2 MatMul kernels for Q4_1, Q5_0 and Q5_1 (llama.cpp's vec_dot order;
// IQ4_NL is in q4_0_lanes_avx2.cc). Compiled with -mavx2 -mfma -mf16c and
// called only after CPU detection (intrinsics and internal-linkage helpers
// only; see kernel_table.h). The AVX-512 table takes them too.
//
// A 32-value block is one ymm in natural order; vpmaddubsw + vpmaddwd make
// int32 lane l the exact sum of values 4l .. 4l + 3 times x, then the float
// steps are Dot32's (quant_scalar.cc), so the results are the scalar
// references' bit for bit.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "model/kernels/quant_blocks.h"

// Products and sums stay separate roundings unless an fma is written out.
#pragma GCC optimize("fp-contract=off")

namespace kvault::kernels {
namespace {

enum class LType { kQ4_1, kQ5_0, kQ5_1 };

#include "model/kernels/helpers_avx2.inc"

// Values 0-15 from the low nibbles of the 16 bytes at qs, 16-31 from the
// high nibbles.
inline __m256i Nibbles(const std::byte* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4),
                          _mm_and_si128(b, m4));
}

// 0x10 in byte j where bit j of the little-endian u32 at qh is set.
inline __m256i FifthBits(const std::byte* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                         0x0303030303030303));
  const __m256i mask = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The block's values: unsigned for Q4_1/Q5_1, signed for Q5_0.
template <LType kType>
inline __m256i Values(const std::byte* blk) {
  if constexpr (kType == LType::kQ4_1) {
    return Nibbles(blk + q4_1::kQs);
  } else if constexpr (kType == LType::kQ5_1) {
    return _mm256_or_si256(Nibbles(blk + q5_1::kQs),
                           FifthBits(blk + q5_1::kQh));
  } else {
    return _mm256_sub_epi8(
        _mm256_or_si256(Nibbles(blk + q5_0::kQs), FifthBits(blk + q5_0::kQh)),
        _mm256_set1_epi8(16));
  }
}

// Lane l: values 4l .. 4l + 3 times x, exact.
template <LType kType>
inline __m256i Lanes(__m256i q, __m256i x) {
  __m256i p16;
  if constexpr (kType == LType::kQ4_1 || kType == LType::kQ5_1) {
    p16 = _mm256_maddubs_epi16(q, x);
  } else {
    p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
  }
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Decode streams one row per tile: fetch the next tile's row ahead.
template <int R>
inline void PrefetchNextRows(const std::byte* const* w, size_t row_bytes,
                             int64_t offset) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // Integer arithmetic: past the last row this points beyond the matrix.
    const uintptr_t addr = reinterpret_cast<uintptr_t>(w[r]) + R * row_bytes +
                           static_cast<uintptr_t>(offset);
    _mm_prefetch(reinterpret_cast<const char*>(addr), _MM_HINT_T0);
  }
}

// Rows [r0, r0 + R) times tokens [t0, t0 + T), each weight block unpacked
// once for the T tokens (matmul_tiling.inc drives it), in Dot32's 8 float
// lanes per element.
template <LType kType, int kBytes>
struct LegacyKernel {
  static constexpr int kRowTile = 2;
  static constexpr int kTokenTile = 4;
  static constexpr bool kQ8_1 = kType == LType::kQ4_1 || kType == LType::kQ5_1;
  static constexpr int kXBytes = kQ8_1 ? q8_1::kBytes : 34;
  static constexpr int kXQs = kQ8_1 ? q8_1::kQs : 2;

  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const std::byte* w[R];
    const std::byte* x[T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_row_bytes;
    __m256 acc8[R][T];
    float summs[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc8[r][t] = _mm256_setzero_ps();
        summs[r][t] = 0.0f;
      }
    }
    const int64_t nb = a.cols / kBlock32;
    for (int64_t b = 0; b < nb; ++b) {
      if constexpr (T == 1) PrefetchNextRows<R>(w, a.w_row_bytes, b * kBytes);
      Step<R, T>(w, x, b, acc8, summs);
    }
    Store<R, T>(a, r0, t0, acc8, summs);
  }

  // Block b of the tile into the accumulators.
  template <int R, int T>
  static inline __attribute__((always_inline)) void Step(
      const std::byte* const* w, const std::byte* const* x, int64_t b,
      __m256 (&acc8)[R][T], float (&summs)[R][T]) {
    __m256i q[R];
    float dw[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::byte* blk = w[r] + b * kBytes;
      q[r] = Values<kType>(blk);
      dw[r] = HalfAt(blk);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::byte* xb = x[t] + b * kXBytes;
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXQs));
      const float dx = HalfAt(xb);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc8[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw[r] * dx),
                                     _mm256_cvtepi32_ps(Lanes<kType>(q[r], xq)),
                                     acc8[r][t]);
        if constexpr (kQ8_1) {
          const float ms =
              HalfAt(w[r] + b * kBytes + 2) * HalfAt(xb + q8_1::kS);
          summs[r][t] = summs[r][t] + ms;
        }
      }
    }
  }

  template <int R, int T>
  static void Store(const MatMulArgs& a, int64_t r0, int64_t t0,
                    const __m256 (&acc8)[R][T], const float (&summs)[R][T]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        float& y = a.y[(t0 + t) * a.y_stride + r0 + r];
        if constexpr (kQ8_1) {
          y = HSum(acc8[r][t]) + summs[r][t];
        } else {
          y = HSum(acc8[r][t]);
        }
      }
    }
  }
};

#include "model/kernels/matmul_tiling.inc"

}  // namespace

void MatMulRowsQ4_1Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsTiled<LegacyKernel<LType::kQ4_1, q4_1::kBytes>>(a, b, e);
}
void MatMulRowsQ5_0Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsTiled<LegacyKernel<LType::kQ5_0, q5_0::kBytes>>(a, b, e);
}
void MatMulRowsQ5_1Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsTiled<LegacyKernel<LType::kQ5_1, q5_1::kBytes>>(a, b, e);
}

}  // namespace kvault::kernels

#endif
