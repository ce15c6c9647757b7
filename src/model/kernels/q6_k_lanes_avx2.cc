// AVX2 Q6_K MatMul with 8 weight rows in the lanes, on k_lanes8_avx2.h's
// driver (the scalar reference is DotQ6KQ8K). Q6_K keeps its f16 d at the
// end of the 210-byte block, so WeightLayout::kGroups16 (head bytes first,
// dwords after) does not fit it: each 8-row super-block is transposed on
// the fly from the file's rows. Its values (q + 32 in 0..63) are unsigned
// (|63 * 128 * 2| < 32768: no saturation), and lane m subtracts the offset
// of chunk m, 32 * (scale[2m] * bsum[2m] + scale[2m + 1] * bsum[2m + 1]).
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

using klanes8::kLanes;
using klanes8::kUnits;
using klanes8::Load256;

constexpr int kQhDword = q6_k::kQh / 4;         // 32
constexpr int kScaleDword = q6_k::kScales / 4;  // 48
constexpr int kSbDwords = kScaleDword + 4;      // ql, qh, scales

// One super-block of 8 rows, unpacked.
struct HalfSb {
  __m256i q[kUnits];   // unit 8c + m, lane r: row r's values 32c + 4m .. + 3
  __m256i scale[16];   // lane r: row r's scale g, both int16 halves
  __m256i offpair[8];  // lane r: int16 pair [scale 2m, scale 2m + 1]
  __m256 d;
};

// vpshufb control putting bytes `lo` and `hi` of each dword into the high
// bytes of its two int16 halves (sign-extended by a shift afterwards).
inline __m256i HighBytePairCtrl(int lo, int hi) {
  const auto dw = [&](int i) {
    return static_cast<int32_t>(0x80u | static_cast<uint32_t>(4 * i + lo) << 8 |
                                0x800000u |
                                static_cast<uint32_t>(4 * i + hi) << 24);
  };
  return _mm256_setr_epi32(dw(0), dw(1), dw(2), dw(3), dw(0), dw(1), dw(2),
                           dw(3));
}

inline __m256i SignedBytePair(__m256i v, int lo, int hi) {
  return _mm256_srai_epi16(_mm256_shuffle_epi8(v, HighBytePairCtrl(lo, hi)), 8);
}

// Unit (c, m) of 8 rows from the transposed dwords: low or high nibbles
// of ql dword 16n + 8 (cp & 1) + m, bits 2cp, 2cp + 1 of qh dword 8n + m
// as bits 4, 5 (n = c / 4, cp = c % 4: the scalar UnpackQ6K's order).
inline __attribute__((always_inline)) __m256i Unit(const __m256i* dw, int c,
                                                   int m) {
  const int n = c / 4, cp = c % 4;
  const __m256i l = dw[16 * n + 8 * (cp & 1) + m];
  const __m256i h = dw[kQhDword + 8 * n + m];
  const __m256i low = _mm256_and_si256(cp >> 1 ? _mm256_srli_epi16(l, 4) : l,
                                       _mm256_set1_epi8(0x0F));
  // epi16 shifts: the bits crossing a byte boundary are masked off.
  const __m256i high = cp == 0   ? _mm256_slli_epi16(h, 4)
                       : cp == 1 ? _mm256_slli_epi16(h, 2)
                       : cp == 2 ? h
                                 : _mm256_srli_epi16(h, 2);
  return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
}

// Rows [0, num_rows) of super-block `p` (row r at p + r * row_bytes) into
// `g`.
void PackHalfSb(const std::byte* p, size_t row_bytes, int num_rows, HalfSb* g) {
  __m256i dw[kSbDwords];
#pragma GCC unroll 6
  for (int q = 0; q < 6; ++q) {
    Transpose8x8Dwords(p + 32 * q, row_bytes, num_rows, dw + 8 * q);
  }
  Transpose8x4Dwords(p + q6_k::kScales, row_bytes, num_rows, dw + kScaleDword);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) g->q[8 * c + m] = Unit(dw, c, m);
  }
#pragma GCC unroll 16
  for (int s = 0; s < 16; ++s) {
    g->scale[s] = SignedBytePair(dw[kScaleDword + s / 4], s % 4, s % 4);
  }
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    const int b = 2 * (m % 2);
    g->offpair[m] = SignedBytePair(dw[kScaleDword + m / 2], b, b + 1);
  }
  alignas(16) uint16_t d[kLanes] = {};
  for (int r = 0; r < num_rows; ++r) {
    std::memcpy(&d[r], p + r * row_bytes + q6_k::kD, sizeof(uint16_t));
  }
  g->d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
}

// One token (decode): a row at a time, one sequential stream. Q6_K's
// float lanes are a row's own (lane m = values 32c + 4m .. + 3), so the 8
// lanes of one ymm per row hold them without a transpose: register c of
// 32 values, vpmaddubsw with x, vpmaddwd with the scales of its two
// 16-value groups (lanes 0-3, 4-7), as llama.cpp's vec_dot.
// Registers 4n .. 4n + 3 of a block's values + 32 (register c = values
// 32c .. 32c + 31), from its 128-value half n.
inline __attribute__((always_inline)) void UnpackRegs(const std::byte* blk,
                                                      int n, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i ql0 = Load256(blk + q6_k::kQl + 64 * n);
  const __m256i ql1 = Load256(blk + q6_k::kQl + 64 * n + 32);
  const __m256i qh = Load256(blk + q6_k::kQh + 32 * n);
  // Bits 2i, 2i + 1 of each qh byte to bits 4, 5 (epi16 shifts: the bits
  // crossing a byte boundary are masked off).
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                         _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                         _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                         _mm256_and_si256(qh, m30));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

float RowDot(const std::byte* w, const std::byte* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * q6_k::kBytes;
    const std::byte* xb = x + b * q8_k::kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4 * q6_k::kBytes,
                 _MM_HINT_T0);
    const __m256i sc16 = _mm256_cvtepi8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q6_k::kScales)));
    // Scales 0-7 (registers 0-3), 8-15 (registers 4-7) in both lanes.
    const __m256i sc8[2] = {_mm256_permute4x64_epi64(sc16, 0x44),
                            _mm256_permute4x64_epi64(sc16, 0xEE)};
    __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      UnpackRegs(blk, n, q);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int c = 4 * n + i;
        const __m256i p16 =
            _mm256_maddubs_epi16(q[i], Load256(xb + q8_k::kQs + 32 * c));
        lanes = _mm256_add_epi32(
            lanes, _mm256_madd_epi16(p16, klanes8::RegScales(sc8[n], c)));
        KeepChain(lanes);
      }
    }
    // Lane m: - 32 * (scale 2m * bsum 2m + scale 2m + 1 * bsum 2m + 1).
    const __m256i off = _mm256_madd_epi16(sc16, Load256(xb + q8_k::kBsums));
    lanes = _mm256_sub_epi32(lanes, _mm256_slli_epi32(off, 5));
    float dx;
    std::memcpy(&dx, xb + q8_k::kD, sizeof(dx));
    const float d = HalfAt(blk + q6_k::kD);
    acc =
        _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(lanes), acc);
  }
  return HSum(acc);
}

struct Q6K : klanes8::Lanes8Type<Q6K> {
  static constexpr int kBytes = q6_k::kBytes;
  static constexpr bool kSigned = false;
  using Sb = HalfSb;

  static void Pack(const std::byte* p, size_t row_bytes, int num_rows, Sb* g) {
    PackHalfSb(p, row_bytes, num_rows, g);
  }
  // Lane m - 32 * (scale[2m] * bsum[2m] + scale[2m + 1] * bsum[2m + 1]).
  static __m256i LaneTerm(const Sb& w, int m, const std::byte* xb,
                          __m256i lane) {
    const __m256i bs = BroadcastDword(xb + q8_k::kBsums + 4 * m);
    return _mm256_sub_epi32(
        lane, _mm256_slli_epi32(_mm256_madd_epi16(w.offpair[m], bs), 5));
  }
  static float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb) {
    return RowDot(w, x, nb);
  }
};

}  // namespace

void MatMulRowsQ6KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  klanes8::MatMulRows<Q6K>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
