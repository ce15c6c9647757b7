// AVX2 MatMul kernels for Q4_1, Q5_0, Q5_1 (llama.cpp's vec_dot order) and
// IQ4_NL (its repacked order). Compiled with -mavx2 -mfma -mf16c and
// called only after CPU detection (intrinsics and internal-linkage helpers
// only; see kernel_table.h). The AVX-512 table takes them too.
//
// A 32-value block is one ymm in natural order; vpmaddubsw + vpmaddwd make
// int32 lane l the exact sum of values 4l .. 4l + 3 times x, then the float
// steps are Dot32's and DotIq4nlSequential's (quant_scalar.cc), so the
// results are the scalar references' bit for bit.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

#include "model/kernels/quant_blocks.h"

// Products and sums stay separate roundings unless an fma is written out.
#pragma GCC optimize("fp-contract=off")

namespace kvault::kernels {
namespace {

enum class LType { kQ4_1, kQ5_0, kQ5_1, kIQ4_NL };

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

// The block's values: unsigned for Q4_1/Q5_1, signed otherwise.
template <LType kType>
inline __m256i Values(const std::byte* blk) {
  if constexpr (kType == LType::kQ4_1) {
    return Nibbles(blk + q4_1::kQs);
  } else if constexpr (kType == LType::kQ5_1) {
    return _mm256_or_si256(Nibbles(blk + q5_1::kQs),
                           FifthBits(blk + q5_1::kQh));
  } else if constexpr (kType == LType::kQ5_0) {
    return _mm256_sub_epi8(
        _mm256_or_si256(Nibbles(blk + q5_0::kQs), FifthBits(blk + q5_0::kQh)),
        _mm256_set1_epi8(16));
  } else {
    const __m256i levels = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    return _mm256_shuffle_epi8(levels, Nibbles(blk + iq4_nl::kQs));
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

template <LType kType, int kBytes>
float DotRow(const std::byte* w, const std::byte* x, int64_t nb) {
  constexpr bool kQ8_1 = kType == LType::kQ4_1 || kType == LType::kQ5_1;
  constexpr int kXBytes = kQ8_1 ? q8_1::kBytes : 34;
  constexpr int kXQs = kQ8_1 ? q8_1::kQs : 2;
  __m256 acc8 = _mm256_setzero_ps();
  float acc = 0.0f;  // IQ4_NL
  float summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * kBytes;
    const std::byte* xb = x + b * kXBytes;
    const __m256i lanes = Lanes<kType>(
        Values<kType>(blk),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kXQs)));
    const float dd = HalfAt(blk) * HalfAt(xb);
    if constexpr (kType == LType::kIQ4_NL) {
      acc = _mm_cvtss_f32(
          _mm_fmadd_ss(_mm_set_ss(static_cast<float>(HSumI32(lanes))),
                       _mm_set_ss(dd), _mm_set_ss(acc)));
    } else {
      acc8 =
          _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(lanes), acc8);
    }
    if constexpr (kQ8_1) {
      const float ms = HalfAt(blk + 2) * HalfAt(xb + q8_1::kS);
      summs = summs + ms;
    }
  }
  if constexpr (kType == LType::kIQ4_NL) return acc;
  if constexpr (kQ8_1) return HSum(acc8) + summs;
  return HSum(acc8);
}

template <LType kType, int kBytes>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlock32;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      a.y[t * a.y_stride + r] = DotRow<kType, kBytes>(
          a.w + r * a.w_row_bytes, a.x + t * a.x_row_bytes, nb);
    }
  }
}

}  // namespace

void MatMulRowsQ4_1Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRows<LType::kQ4_1, q4_1::kBytes>(a, b, e);
}
void MatMulRowsQ5_0Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRows<LType::kQ5_0, q5_0::kBytes>(a, b, e);
}
void MatMulRowsQ5_1Avx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRows<LType::kQ5_1, q5_1::kBytes>(a, b, e);
}
void MatMulRowsIq4nlAvx2(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRows<LType::kIQ4_NL, iq4_nl::kBytes>(a, b, e);
}

}  // namespace kvault::kernels

#endif
