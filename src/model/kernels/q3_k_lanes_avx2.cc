// AVX2 Q3_K MatMul with 8 weight rows in the lanes (k_lanes8_avx2.h; the
// scalar reference is DotQ3KQ8K). Values -4..3 (2 low bits, minus 4 where
// the high bit is clear) are signed: vpmaddubsw takes |q| against sign(x,
// q). The sixteen 6-bit scales (12 bytes after the bits) are unpacked with
// int32 shifts per lane (prefill) or per byte (decode).
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

// Register c = 4n + j (values 128n + 32j .. + 31) or its units, from the
// matching qs bytes of half n (bits 2j, 2j + 1) and hmask bytes (bit c).
inline __attribute__((always_inline)) __m256i Threes(__m256i qs, __m256i hm,
                                                     int j, int c) {
  const __m256i low =
      _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(3));
  // epi16 shifts: the bits crossing a byte boundary are masked off.
  const __m256i high = _mm256_and_si256(
      c <= 2 ? _mm256_slli_epi16(hm, 2 - c) : _mm256_srli_epi16(hm, c - 2),
      _mm256_set1_epi8(4));
  return _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
}

// Scale g (0..15) of each lane's row from its scale dwords s[0..2] (bytes
// 0-3, 4-7, 8-11): UnpackQ3KScales's bits, in both int16 halves.
inline __m256i LaneScale(const __m256i s[3], int g) {
  const int byte = 8 * (g % 4);
  const __m256i low =
      _mm256_and_si256(_mm256_srli_epi32(s[(g % 8) / 4], byte + 4 * (g / 8)),
                       _mm256_set1_epi32(0x0F));
  const __m256i high = _mm256_and_si256(
      _mm256_srli_epi32(s[2], byte + 2 * (g / 4)), _mm256_set1_epi32(3));
  return BothHalves(_mm256_sub_epi32(
      _mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32)));
}

// A block's 16 scales as int8, UnpackQ3KScales's values.
inline __m128i BlockScales(const std::byte* q) {
  int64_t lo;
  int32_t hi;
  std::memcpy(&lo, q, sizeof(lo));
  std::memcpy(&hi, q + 8, sizeof(hi));
  const __m128i v = _mm_cvtsi64_si128(lo);
  // Bytes 0-7: low nibbles (scales 0-7); 8-15: high nibbles (8-15).
  const __m128i nibbles = _mm_and_si128(
      _mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)), _mm_set1_epi8(0x0F));
  // Byte 4i + k: bits 2i, 2i + 1 of byte k of bytes 8-11.
  const __m128i high = _mm_and_si128(
      _mm_srlv_epi32(_mm_set1_epi32(hi), _mm_setr_epi32(0, 2, 4, 6)),
      _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(nibbles, _mm_slli_epi16(high, 4)),
                      _mm_set1_epi8(32));
}

struct Q3K : klanes8::Lanes8Type<Q3K> {
  static constexpr int kBytes = q3_k::kBytes;
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
    __m256i hm[8];
    Transpose8x8Dwords(p + q3_k::kHmask, row_bytes, num_rows, hm);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i qs[8];
      Transpose8x8Dwords(p + q3_k::kQs + 32 * n, row_bytes, num_rows, qs);
#pragma GCC unroll 32
      for (int i = 0; i < 32; ++i) {
        const int j = i / 8, m = i % 8, c = 4 * n + j;
        const __m256i v = Threes(qs[m], hm[m], j, c);
        g->q[8 * c + m] = _mm256_sign_epi8(v, v);
        g->sign[8 * c + m] = v;
      }
    }
    // Gathered: the 16 bytes at the scales would run past the block.
    const __m256i s[3] = {
        GatherDwords(p + q3_k::kScales, row_bytes, num_rows),
        GatherDwords(p + q3_k::kScales + 4, row_bytes, num_rows),
        GatherDwords(p + q3_k::kScales + 8, row_bytes, num_rows)};
#pragma GCC unroll 16
    for (int gr = 0; gr < 16; ++gr) g->scale[gr] = LaneScale(s, gr);
    __m256 unused;  // bytes 106, 107 are the last scales
    SplitHalves(GatherDwords(p + q3_k::kD - 2, row_bytes, num_rows), &unused,
                &g->d);
  }

  // One row against one token: the scalar DotQ3KQ8K's floats.
  static float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = w + b * kBytes;
      const std::byte* xb = x + b * q8_k::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + 4 * kBytes,
                   _MM_HINT_T0);
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(BlockScales(blk + q3_k::kScales));
      // Scales 0-7 (registers 0-3), 8-15 (registers 4-7) in both lanes.
      const __m256i sc8[2] = {_mm256_permute4x64_epi64(sc16, 0x44),
                              _mm256_permute4x64_epi64(sc16, 0xEE)};
      const __m256i hm = Load256(blk + q3_k::kHmask);
      __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int n = 0; n < 2; ++n) {
        const __m256i qs = Load256(blk + q3_k::kQs + 32 * n);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * n + j;
          klanes8::AddReg<true>(Threes(qs, hm, j, c),
                                Load256(xb + q8_k::kQs + 32 * c),
                                klanes8::RegScales(sc8[n], c), lanes);
        }
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(HalfAt(blk + q3_k::kD) *
                                           klanes8::FloatAt(xb + q8_k::kD)),
                            _mm256_cvtepi32_ps(lanes), acc);
    }
    return HSum(acc);
  }
};

}  // namespace

void MatMulRowsQ3KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  klanes8::MatMulRows<Q3K>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
