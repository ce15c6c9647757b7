// AVX2 IQ4_XS MatMul with 8 weight rows in the lanes (k_lanes8_avx2.h; the
// scalar reference is DotIq4xsQ8K). The 4-bit indices become the signed
// IQ4_NL levels by one vpshufb; vpmaddubsw takes |level| (<= 127) against
// sign(x, level). A 32-value register has one scale (6 bits, - 32), so the
// group scales 2c and 2c + 1 are the same.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

#include "model/kernels/k_lanes8_avx2.h"
#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_avx2.inc"

using klanes8::Acc;
using klanes8::kUnits;
using klanes8::Load256;

// The 16 levels in both 128-bit lanes, for vpshufb.
inline __m256i Levels() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// The levels of nibble h (0: low, 1: high) of each byte of `qs`.
inline __attribute__((always_inline)) __m256i LevelsOf(__m256i qs, int h) {
  const __m256i idx = _mm256_and_si256(h ? _mm256_srli_epi16(qs, 4) : qs,
                                       _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(Levels(), idx);
}

// Int32 lane c of (scales_l, scales_h) = scale c - 32 (c < 8).
inline __m256i Scales(__m256i scales_l, __m256i scales_h) {
  const __m256i low = _mm256_and_si256(
      _mm256_srlv_epi32(scales_l,
                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
      _mm256_set1_epi32(0x0F));
  const __m256i high = _mm256_and_si256(
      _mm256_srlv_epi32(scales_h, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)),
                          _mm256_set1_epi32(32));
}

struct Iq4xs : klanes8::Lanes8Type<Iq4xs> {
  static constexpr int kBytes = iq4_xs::kBytes;
  static constexpr bool kSigned = true;

  // One super-block of 8 rows, unpacked.
  struct Sb {
    __m256i q[kUnits];     // unit 8c + m, lane r: |values 32c + 4m .. + 3|
    __m256i sign[kUnits];  // the values themselves
    __m256i scale[16];     // lane r: group g's scale, both int16 halves
    __m256 d;
  };

  // Rows [0, num_rows) of the super-block at p (row r at p + r *
  // row_bytes) into g.
  static void Pack(const std::byte* p, size_t row_bytes, int num_rows, Sb* g) {
    __m256i head[4];  // d | scales_h << 16, scales_l, qs
    Transpose8x4Dwords(p, row_bytes, num_rows, head);
    __m256 unused;
    SplitHalves(head[0], &g->d, &unused);
    const __m256i scales_h = _mm256_srli_epi32(head[0], 16);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i low = _mm256_and_si256(_mm256_srli_epi32(head[1], 4 * c),
                                           _mm256_set1_epi32(0x0F));
      const __m256i high = _mm256_and_si256(_mm256_srli_epi32(scales_h, 2 * c),
                                            _mm256_set1_epi32(3));
      g->scale[2 * c] = g->scale[2 * c + 1] = BothHalves(
          _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)),
                           _mm256_set1_epi32(32)));
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m256i dw[8];  // registers 2k (dwords 0-3) and 2k + 1 (4-7)
      Transpose8x8Dwords(p + iq4_xs::kQs + 32 * k, row_bytes, num_rows, dw);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const int c = 2 * k + i / 8, m = i % 8;
        const __m256i v = LevelsOf(dw[4 * (c % 2) + m % 4], m / 4);
        g->q[8 * c + m] = _mm256_sign_epi8(v, v);
        g->sign[8 * c + m] = v;
      }
    }
  }

  // One row against one token: the scalar DotIq4xsQ8K's floats.
  static float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = w + b * kBytes;
      const std::byte* xb = x + b * q8_k::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + 4 * kBytes,
                   _MM_HINT_T0);
      uint16_t sh;
      uint32_t sl;
      std::memcpy(&sh, blk + iq4_xs::kScalesH, sizeof(sh));
      std::memcpy(&sl, blk + iq4_xs::kScalesL, sizeof(sl));
      const __m256i sc = BothHalves(Scales(
          _mm256_set1_epi32(static_cast<int32_t>(sl)), _mm256_set1_epi32(sh)));
      __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // Registers 2k, 2k + 1: the low nibbles of 16 bytes, then the high.
        const __m256i qs = Load256(blk + iq4_xs::kQs + 32 * k);
        const __m256i lo = LevelsOf(qs, 0), hi = LevelsOf(qs, 1);
        // (The permute's selector must be a literal for clang.)
        const __m256i regs[2] = {_mm256_permute2x128_si256(lo, hi, 0x20),
                                 _mm256_permute2x128_si256(lo, hi, 0x31)};
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const int c = 2 * k + h;
          klanes8::AddReg<true>(
              regs[h], Load256(xb + q8_k::kQs + 32 * c),
              _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(c)), lanes);
        }
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfAt(blk + iq4_xs::kD) *
                                           klanes8::FloatAt(xb + q8_k::kD)),
                            _mm256_cvtepi32_ps(lanes), acc);
    }
    return HSum(acc);
  }
};

}  // namespace

void MatMulRowsIq4xsAvx2(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end) {
  klanes8::MatMulRows<Iq4xs>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
