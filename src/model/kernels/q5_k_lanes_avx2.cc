// AVX2 Q5_K MatMul with 8 weight rows in the lanes (k_lanes8_avx2.h; the
// scalar reference is DotQ5KQ8K). Q5_K's first 16 bytes (d, dmin, 12
// bytes of 6-bit scales and mins) are Q4_K's, so the 8-row scales come from
// q4_k_lanes_avx2.h. Values 0..31 are unsigned: vpmaddubsw straight
// against x. The mins go into each row's scalar summs once per block:
// summs = fma(-dx * dmin, sum_j min_j * bsum32_j, summs).
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "model/kernels/k_lanes8_avx2.h"
#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/q4_k_lanes_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_avx2.inc"

using klanes8::Acc;
using klanes8::kUnits;
using klanes8::Load256;

// Register c (values 32c .. + 31, natural order) or unit (c, m) from the
// matching qs bytes (nibble c % 2) and qh bytes (bit c, to bit 4).
inline __attribute__((always_inline)) __m256i Fives(__m256i qs, __m256i qh,
                                                    int c) {
  const __m256i low = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(qs, 4) : qs,
                                       _mm256_set1_epi8(0x0F));
  // epi16 shifts: the bits crossing a byte boundary are masked off.
  const __m256i high =
      c <= 4 ? _mm256_slli_epi16(qh, 4 - c) : _mm256_srli_epi16(qh, c - 4);
  return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x10)));
}

// A Q8_K block's 32-value sums: int16 j = bsum 2j + bsum 2j + 1 (|.| <=
// 32 * 128, no wrap).
inline __m128i Bsums32(const std::byte* xb) {
  const __m256i b16 = Load256(xb + q8_k::kBsums);
  return _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                        _mm256_extracti128_si256(b16, 1));
}

struct Q5K : klanes8::Lanes8Type<Q5K> {
  static constexpr int kBytes = q5_k::kBytes;
  static constexpr bool kSigned = false;
  static constexpr bool kMins = true;

  // One super-block of 8 rows, unpacked.
  struct Sb {
    __m256i q[kUnits];   // unit 8c + m, lane r: values 32c + 4m .. + 3
    __m256i scale[16];   // lane r: group g's scale, both int16 halves
    __m256i minpair[4];  // lane r: int16 pair [min 2c, min 2c + 1]
    __m256 d;
    __m256 dmin;
  };

  // Rows [0, num_rows) of the super-block at p (row r at p + r *
  // row_bytes) into g.
  static void Pack(const std::byte* p, size_t row_bytes, int num_rows, Sb* g) {
    __m256i head[4];
    Transpose8x4Dwords(p, row_bytes, num_rows, head);
    q4k_avx2::SbScales s;
    q4k_avx2::UnpackScales(head, &s);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c)
      g->scale[2 * c] = g->scale[2 * c + 1] = s.scale[c];
    std::memcpy(g->minpair, s.minpair, sizeof(s.minpair));
    g->d = s.d;
    g->dmin = s.dmin;
    __m256i qh[8];
    Transpose8x8Dwords(p + q5_k::kQh, row_bytes, num_rows, qh);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m256i qs[8];
      Transpose8x8Dwords(p + q5_k::kQs + 32 * k, row_bytes, num_rows, qs);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const int c = 2 * k + i / 8, m = i % 8;
        g->q[8 * c + m] = Fives(qs[m], qh[m], c);
      }
    }
  }

  // acc->summs = fma(-dx * dmin, sum of min * bsum, summs), per row.
  static void BlockTerm(const Sb& w, const std::byte* xb, Acc* acc) {
    alignas(16) int32_t pairs[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(pairs), Bsums32(xb));
    __m256i mins = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      mins = _mm256_add_epi32(
          mins, _mm256_madd_epi16(w.minpair[c], _mm256_set1_epi32(pairs[c])));
    }
    const __m256 dm =
        _mm256_mul_ps(_mm256_set1_ps(-klanes8::FloatAt(xb + q8_k::kD)), w.dmin);
    acc->summs = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(mins), acc->summs);
  }

  // One row against one token: the scalar DotQ5KQ8K's floats.
  static float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb);
};

// A Q4_K / Q5_K block's 8 scales and 8 mins (UnpackQ4KScales) as int16.
inline void ScalesMins(const std::byte* q, __m128i* scales, __m128i* mins) {
  uint32_t u[3];
  std::memcpy(u, q, sizeof(u));
  constexpr uint32_t k6 = 0x3F3F3F3F, k4 = 0x0F0F0F0F, k2 = 0x03030303;
  const uint64_t s =
      (u[0] & k6) | uint64_t{(u[2] & k4) | ((u[0] >> 6) & k2) << 4} << 32;
  const uint64_t m =
      (u[1] & k6) | uint64_t{((u[2] >> 4) & k4) | ((u[1] >> 6) & k2) << 4}
                        << 32;
  *scales = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(s)));
  *mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m)));
}

// Int16 c of `sc` (both 128-bit lanes) in every int16 of the register.
inline __m256i ScaleOf(__m256i sc, int c) {
  return _mm256_shuffle_epi8(
      sc, _mm256_set1_epi16(static_cast<int16_t>(2 * c | (2 * c + 1) << 8)));
}

float Q5K::DecodeRow(const std::byte* w, const std::byte* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * kBytes;
    const std::byte* xb = x + b * q8_k::kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4 * kBytes, _MM_HINT_T0);
    __m128i sc16, mn16;
    ScalesMins(blk + q5_k::kScales, &sc16, &mn16);
    const __m256i sc = _mm256_broadcastsi128_si256(sc16);
    const __m256i qh = Load256(blk + q5_k::kQh);
    __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i qs = Load256(blk + q5_k::kQs + 32 * k);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int c = 2 * k + h;
        klanes8::AddReg<false>(Fives(qs, qh, c),
                               Load256(xb + q8_k::kQs + 32 * c), ScaleOf(sc, c),
                               lanes);
      }
    }
    const float dx = klanes8::FloatAt(xb + q8_k::kD);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfAt(blk + q5_k::kD) * dx),
                          _mm256_cvtepi32_ps(lanes), acc);
    __m128i m4 = _mm_madd_epi16(mn16, Bsums32(xb));
    m4 = _mm_add_epi32(m4, _mm_unpackhi_epi64(m4, m4));
    const int32_t mins = _mm_cvtsi128_si32(m4) + _mm_extract_epi32(m4, 1);
    summs = std::fma(-dx * HalfAt(blk + q5_k::kDmin), static_cast<float>(mins),
                     summs);
  }
  return HSum(acc) + summs;
}

}  // namespace

void MatMulRowsQ5KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  klanes8::MatMulRows<Q5K>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
