// AVX-512 VNNI MatMul kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K) against Q8_K activations. Compiled with -mavx512* and called only
// after CPU detection (see kernel_table.h: intrinsics and internal-linkage
// helpers only).
//
// Each weight super-block is unpacked into four zmm of 64 unsigned values
// in natural order (Q3_K, Q6_K and IQ4_XS offset to unsigned: q + 4,
// q + 32, q + 128) and its scales spread over the int32 lanes. Per (row,
// token, super-block):
//   p_c   = vpdpbusd(init, w_c, x_c)     4 products per int32 lane
//   isum  = sum_c vpdpwssd(p_c, [s, 0])  lane * its group's scale
// The integer part is exact; how its lanes become floats (the Combine
// mode) is the float order of llama.cpp b10573's own kernel for the type,
// read from its machine code, so that outputs agree with it bit for bit.
// Every output element depends only on its row, its token and the token's
// DotOrder.
#include "model/kernels/kernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/quant_blocks.h"
#include "model/kernels/quant_scalar.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvault::kernels {
namespace {

constexpr int kSubRegs = 4;  // zmm of 64 values per super-block

// One weight super-block ready for the dot products.
struct PackedW {
  __m512i q[kSubRegs];      // unsigned values, natural order
  __m512i scale[kSubRegs];  // lane i of reg c: [s(4c + i / 4), 0] as int16
  __m128i mins8;            // Q4_K/Q5_K: the 8 sub-block mins as int16
  __m256i mins16;           // Q2_K: the 16 group mins as int16
  __m256i scales16;         // Q6_K: the 16 group scales as int16
  float d;
  float dmin;  // Q4_K/Q5_K
};

// One activation super-block.
struct PackedX {
  __m512i q[kSubRegs];
  __m256i bsums16;           // the 16 block sums as int16
  __m512i corr32[kSubRegs];  // -offset * (sum of each lane's 4 values)
  __m128i sums8;  // int16 sums of each 32-value sub-block (bsum pairs)
  float d;
};

// How a super-block's integer lanes become floats.
enum class Combine {
  // Q4_K and Q2_K as llama.cpp's repacked GEMV/GEMM sum them: per step
  // of 256 values (kGemv), or of 64 (Q4_K) / 128 (Q2_K) values (kGemm),
  // the exact integer sums isum (all lanes of the step) and imin (mins
  // times block sums), then acc = fma(isum, d * dx, acc) and accm =
  // fma(imin, dmin * dx, accm), kept in lanes 0 and 1; result acc - accm.
  kGgmlSteppedQ4K,
  kGgmlSteppedQ2K,
  // Q5_K as ggml's AVX2 vec_dot sums it: the scales' int32 lanes folded
  // to 8 (i and i + 8) and acc8 = fma(dx * d, lanes, acc8) per super-block;
  // the mins' integer sum (sub-block mins times bsum pairs) into a scalar,
  // summs = fma(-dx * dmin, sum, summs) (one rounding), kept in lane 8;
  // result hsum8(acc8) + summs. (Q4_K is not summed this way: ggml
  // repacks it for batches, in another order.)
  kGgmlQ5K,
  // The orders of llama.cpp b10573's own x86 vec_dot (read from its
  // machine code; bit-identical on every row of the st260K-x4 files): the
  // scales' int32 lanes folded to 8 (i and i + 8: lane m holds values
  // 4m .. 4m + 3 of every 32-value chunk), acc8 = fma(d * dx, lanes,
  // acc8) per super-block, then an 8-lane horizontal sum. They differ in
  // where the offset of the unsigned values goes (see DotKLanes8 in
  // quant_scalar.cc, the scalar reference):
  // Q6_K: lane m -= 32 * (s[2m] * bsum[2m] + s[2m + 1] * bsum[2m + 1]).
  kGgmlQ6K,
  // Q3_K: -4 * (sum of each lane's 4 activations) inside the lane.
  kGgmlQ3K,
  // IQ4_XS: values + 128, -128 * (the lane's 4 activations) inside the
  // lane; the products exceed int16, so the scales multiply in int32.
  kGgmlIq4xs,
};

// Whether kCombine folds to ggml's 8 lanes with one fma per super-block.
constexpr bool IsLanes8(Combine c) {
  return c == Combine::kGgmlQ6K || c == Combine::kGgmlQ3K ||
         c == Combine::kGgmlIq4xs;
}

// The unsigned offset kCombine corrects inside each lane (0: none).
constexpr int InLaneOffset(Combine c) {
  return c == Combine::kGgmlQ3K ? 4 : c == Combine::kGgmlIq4xs ? 128 : 0;
}

inline float HalfAt(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

inline uint8_t ByteAt(const std::byte* p, int i) {
  return std::to_integer<uint8_t>(p[i]);
}

// Lane i of register c holds values 64c + 4i .. 64c + 4i + 3: group
// 4c + i / 4 of 16 values, sub-block 2c + i / 8 of 32.
alignas(64) constexpr int32_t kGroupOfLane[kSubRegs][16] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
    {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
    {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
alignas(64) constexpr int32_t kSubBlockOfLane[kSubRegs][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
inline __m512i LoadIdx(const int32_t* idx) {
  return _mm512_load_si512(reinterpret_cast<const __m512i*>(idx));
}

// Spreads 16 int32 group scales (values fitting int16) over the lanes of
// the four registers as int16 pairs [s, 0] for vpdpwssd.
inline __attribute__((always_inline)) void SpreadScales(__m512i scales16,
                                                        PackedW* w) {
  const __m512i mask16 = _mm512_set1_epi32(0xFFFF);
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    w->scale[c] = _mm512_and_si512(
        _mm512_permutexvar_epi32(LoadIdx(kGroupOfLane[c]), scales16), mask16);
  }
}

// The eight 6-bit scales and mins of Q4_K/Q5_K as 16 bytes [scales |
// mins]. Packed: bytes 0-3 hold scales 0-3 (low 6 bits) and the top bits
// of scales 4-7; bytes 4-7 mins 0-3 and the top bits of mins 4-7; bytes
// 8-11 the low nibbles of scales 4-7 (low) and mins 4-7 (high).
inline __m128i ScalesAndMinsQ4K(const std::byte* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof(w));
  constexpr uint32_t kLow6 = 0x3F3F3F3F, kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
  const uint32_t scales_lo = w[0] & kLow6;
  const uint32_t mins_lo = w[1] & kLow6;
  const uint32_t scales_hi = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
  const uint32_t mins_hi = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
  return _mm_set_epi32(static_cast<int>(mins_hi), static_cast<int>(mins_lo),
                       static_cast<int>(scales_hi),
                       static_cast<int>(scales_lo));
}

// Q4_K / Q5_K: 64-value chunk c is the low nibbles of qs[32c, 32c + 32)
// then their high nibbles; Q5_K's fifth bits are bits 2c and 2c + 1 of
// qh[l].
template <bool kQ5>
inline __attribute__((always_inline)) void UnpackQ45K(const std::byte* blk,
                                                      PackedW* w) {
  const std::byte* qs = blk + (kQ5 ? q5_k::kQs : q4_k::kQs);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // qs bytes [64k, 64k + 64): chunks 2k, 2k+1
    const __m512i b = _mm512_loadu_si512(qs + 64 * k);
    const __m512i lo = _mm512_and_si512(b, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
    // [lo0 lo1 | lo2 lo3] [hi0 hi1 | hi2 hi3] (128-bit quarters) ->
    // chunk 2k = [lo0 lo1 hi0 hi1], chunk 2k + 1 = [lo2 lo3 hi2 hi3].
    w->q[2 * k] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    w->q[2 * k + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
  }
  if constexpr (kQ5) {
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + q5_k::kQh)));
    const __m512i bit = _mm512_set1_epi8(0x10);
    constexpr __mmask64 kUpper = 0xFFFFFFFF00000000ULL;
#pragma GCC unroll 4
    for (int c = 0; c < kSubRegs; ++c) {
      // Bit 2c (low half) / 2c + 1 (high half) of qh[l] moved to bit 4.
      const __m512i lo = c <= 2 ? _mm512_slli_epi16(qh, 4 - 2 * c)
                                : _mm512_srli_epi16(qh, 2 * c - 4);
      const __m512i hi = c <= 1 ? _mm512_slli_epi16(qh, 3 - 2 * c)
                                : _mm512_srli_epi16(qh, 2 * c - 3);
      w->q[c] = _mm512_or_si512(
          w->q[c],
          _mm512_and_si512(_mm512_mask_blend_epi8(kUpper, lo, hi), bit));
    }
  }
  const __m128i sm_bytes = ScalesAndMinsQ4K(blk + q4_k::kScales);
  const __m512i sm = _mm512_cvtepu8_epi32(sm_bytes);
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    w->scale[c] = _mm512_permutexvar_epi32(LoadIdx(kSubBlockOfLane[c]), sm);
  }
  w->d = HalfAt(blk + q4_k::kD);
  w->dmin = HalfAt(blk + q4_k::kDmin);
  w->mins8 = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm_bytes, sm_bytes));
}

// Q6_K: per 128-value half n, ql[64n, 64n + 64) low nibbles are values
// [0, 64), high nibbles [64, 128); bits 2k, 2k + 1 of qh[32n + l] are the
// high bits of value 32k + l.
inline __attribute__((always_inline)) void UnpackQ6K(const std::byte* blk,
                                                     PackedW* w) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  constexpr __mmask64 kUpper = 0xFFFFFFFF00000000ULL;
  for (int n = 0; n < 2; ++n) {
    const __m512i ql = _mm512_loadu_si512(blk + q6_k::kQl + 64 * n);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(blk + q6_k::kQh + 32 * n)));
    // Bits (0,1) | (2,3) for the low chunk, (4,5) | (6,7) for the high.
    const __m512i h0 = _mm512_mask_blend_epi8(kUpper, _mm512_slli_epi16(qh, 4),
                                              _mm512_slli_epi16(qh, 2));
    const __m512i h1 =
        _mm512_mask_blend_epi8(kUpper, qh, _mm512_srli_epi16(qh, 2));
    w->q[2 * n] =
        _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(h0, m30));
    w->q[2 * n + 1] =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                        _mm512_and_si512(h1, m30));
  }
  const __m512i s16 = _mm512_cvtepi8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q6_k::kScales)));
  SpreadScales(s16, w);
  // value = d * s * (u - 32): Combine::kGgmlQ6K subtracts the offset
  // through the block sums, in integers, so no float min term is needed.
  w->scales16 = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q6_k::kScales)));
  w->d = HalfAt(blk + q6_k::kD);
}

// Q2_K / Q3_K: per 128-value half n, the 2-bit fields of q[32n + l] at
// shift 2j are values 32j + l; Q3_K adds the high bit 4n + j of hmask[l]
// (u = q + 4 in [0, 8)).
template <bool kQ3>
inline __attribute__((always_inline)) void UnpackQ23K(const std::byte* blk,
                                                      PackedW* w) {
  const __m512i m3 = _mm512_set1_epi8(0x03);
  constexpr __mmask64 kUpper = 0xFFFFFFFF00000000ULL;
  const int qs_off = kQ3 ? q3_k::kQs : q2_k::kQs;
  __m512i hm = _mm512_setzero_si512();
  if constexpr (kQ3) {
    hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(blk + q3_k::kHmask)));
  }
  for (int n = 0; n < 2; ++n) {
    const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(blk + qs_off + 32 * n)));
    for (int k = 0; k < 2; ++k) {  // register 2n + k: j = 2k, 2k + 1
      const int j0 = 2 * k;
      __m512i u = _mm512_and_si512(
          _mm512_mask_blend_epi8(kUpper, _mm512_srli_epi16(q, 2 * j0),
                                 _mm512_srli_epi16(q, 2 * j0 + 2)),
          m3);
      if constexpr (kQ3) {
        const int bit = 4 * n + j0;  // then bit + 1 for the upper half
        const __m512i sel = _mm512_mask_blend_epi8(
            kUpper, _mm512_set1_epi8(static_cast<char>(1 << bit)),
            _mm512_set1_epi8(static_cast<char>(1 << (bit + 1))));
        const __mmask64 set = _mm512_test_epi8_mask(hm, sel);
        u = _mm512_mask_add_epi8(u, set, u, _mm512_set1_epi8(4));
      }
      w->q[2 * n + k] = u;
    }
  }
  if constexpr (kQ3) {
    int8_t sc[16];
    UnpackQ3KScales(reinterpret_cast<const uint8_t*>(blk + q3_k::kScales), sc);
    const __m512i s16 =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<__m128i*>(sc)));
    SpreadScales(s16, w);
    w->d = HalfAt(blk + q3_k::kD);
  } else {
    const __m128i bytes =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q2_k::kScales));
    const __m512i packed = _mm512_cvtepu8_epi32(bytes);
    SpreadScales(_mm512_and_si512(packed, _mm512_set1_epi32(0x0F)), w);
    w->mins16 = _mm256_cvtepu8_epi16(
        _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F)));
    w->d = HalfAt(blk + q2_k::kD);
    w->dmin = HalfAt(blk + q2_k::kDmin);
  }
}

// IQ4_XS: sub-block j's 16 bytes hold values 32j + i (low nibbles) and
// 32j + 16 + i (high), indices into the IQ4_NL levels; u = level + 128.
// The 6-bit scale of each 32 values minus 32, as int32 per lane.
inline __attribute__((always_inline)) void UnpackIq4xs(const std::byte* blk,
                                                       PackedW* w) {
  const __m512i levels = _mm512_broadcast_i32x4(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    const __m256i b = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(blk + iq4_xs::kQs + 32 * c));
    const __m512i lo_hi =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m4)),
                           _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), 1);
    // [lo0 lo1 hi0 hi1] (128-bit quarters) -> [lo0 hi0 lo1 hi1].
    const __m512i idx =
        _mm512_shuffle_i64x2(lo_hi, lo_hi, _MM_SHUFFLE(3, 1, 2, 0));
    w->q[c] = _mm512_xor_si512(_mm512_shuffle_epi8(levels, idx),
                               _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + iq4_xs::kScalesH, sizeof(scales_h));
  alignas(32) int32_t ls[8];
  for (int j = 0; j < 8; ++j) {
    const int low =
        (ByteAt(blk + iq4_xs::kScalesL, j / 2) >> (4 * (j % 2))) & 15;
    ls[j] = (low | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
  }
  const __m512i s8 = _mm512_castsi256_si512(
      _mm256_load_si256(reinterpret_cast<const __m256i*>(ls)));
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    w->scale[c] = _mm512_permutexvar_epi32(LoadIdx(kSubBlockOfLane[c]), s8);
  }
  w->d = HalfAt(blk + iq4_xs::kD);
}

// Packs one activation super-block with what `kCombine` reads: the block
// sums as int16 (kGgmlQ6K, kGgmlSteppedQ2K), the in-lane offset correction
// (kGgmlQ3K, kGgmlIq4xs) or the sub-block sums (kGgmlQ5K,
// kGgmlSteppedQ4K).
template <Combine kCombine>
void PackX(const std::byte* xb, PackedX* x) {
  for (int c = 0; c < kSubRegs; ++c) {
    x->q[c] = _mm512_loadu_si512(xb + q8_k::kQs + 64 * c);
  }
  std::memcpy(&x->d, xb + q8_k::kD, sizeof(float));
  const __m256i b16 =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q8_k::kBsums));
  if constexpr (kCombine == Combine::kGgmlQ6K ||
                kCombine == Combine::kGgmlSteppedQ2K) {
    x->bsums16 = b16;
  } else if constexpr (InLaneOffset(kCombine) != 0) {
    const __m512i k =
        _mm512_set1_epi8(static_cast<char>(InLaneOffset(kCombine)));
    for (int c = 0; c < kSubRegs; ++c) {
      x->corr32[c] = _mm512_sub_epi32(
          _mm512_setzero_si512(),
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), k, x->q[c]));
    }
  } else {
    x->sums8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                              _mm256_extracti128_si256(b16, 1));
  }
}

// [S0, S1, S2, S3]: the sums of all lanes of s[0] .. s[3].
inline __attribute__((always_inline)) __m128i LaneSums4(const __m512i s[4]) {
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]),
                                     _mm512_unpackhi_epi32(s[0], s[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]),
                                     _mm512_unpackhi_epi32(s[2], s[3]));
  const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b),
                                     _mm512_unpackhi_epi64(a, b));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(c),
                                     _mm512_extracti64x4_epi64(c, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h),
                       _mm256_extracti128_si256(h, 1));
}

// Combine::kGgmlStepped*: lanes 0 and 1 of `acc` hold acc and accm.
template <Combine kCombine>
inline __attribute__((always_inline)) __m512 StepStepped(const PackedW& w,
                                                         const PackedX& x,
                                                         __m512 acc,
                                                         bool gemm) {
  __m128i mins;  // per 64-value chunk
  if constexpr (kCombine == Combine::kGgmlSteppedQ4K) {
    mins = _mm_madd_epi16(w.mins8, x.sums8);
  } else {
    const __m256i m = _mm256_madd_epi16(w.mins16, x.bsums16);
    mins = _mm_hadd_epi32(_mm256_castsi256_si128(m),
                          _mm256_extracti128_si256(m, 1));
  }
  const __m128 k = _mm_set_ps(0.0f, 0.0f, w.dmin * x.d, w.d * x.d);
  __m128 v = _mm512_castps512_ps128(acc);
  if (!gemm) {  // one step of 256 values: the chunks' sums added first
    __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < kSubRegs; ++c) {
      isum = _mm512_dpwssd_epi32(
          isum, _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[c], x.q[c]),
          w.scale[c]);
    }
    const __m128i m2 = _mm_add_epi32(mins, _mm_unpackhi_epi64(mins, mins));
    const __m128i sm =
        _mm_unpacklo_epi32(_mm_cvtsi32_si128(_mm512_reduce_add_epi32(isum)),
                           _mm_add_epi32(m2, _mm_srli_si128(m2, 4)));
    v = _mm_fmadd_ps(_mm_cvtepi32_ps(sm), k, v);
    return _mm512_zextps128_ps512(v);
  }
  __m512i s[kSubRegs];
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    const __m512i p =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[c], x.q[c]);
    s[c] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p, w.scale[c]);
  }
  const __m128i sums = LaneSums4(s);                     // per 64-value chunk
  const __m128i p = _mm_unpacklo_epi32(sums, mins);      // S0 M0 S1 M1
  const __m128i q = _mm_unpackhi_epi32(sums, mins);      // S2 M2 S3 M3
  if constexpr (kCombine == Combine::kGgmlSteppedQ4K) {  // 4 of 64
    const __m128 f01 = _mm_cvtepi32_ps(p);
    const __m128 f23 = _mm_cvtepi32_ps(q);
    v = _mm_fmadd_ps(f01, k, v);
    v = _mm_fmadd_ps(_mm_movehl_ps(f01, f01), k, v);
    v = _mm_fmadd_ps(f23, k, v);
    v = _mm_fmadd_ps(_mm_movehl_ps(f23, f23), k, v);
  } else {  // Q2_K: 2 of 128
    const __m128i p2 = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
    const __m128i q2 = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
    v = _mm_fmadd_ps(_mm_cvtepi32_ps(p2), k, v);
    v = _mm_fmadd_ps(_mm_cvtepi32_ps(q2), k, v);
  }
  return _mm512_zextps128_ps512(v);
}

// acc += this super-block's contribution for one row and one token (in
// the order kGemm or kGemv where kCombine tells them apart).
template <Combine kCombine>
inline __attribute__((always_inline)) __m512 Step(const PackedW& w,
                                                  const PackedX& x, __m512 acc,
                                                  bool gemm) {
  if constexpr (kCombine == Combine::kGgmlSteppedQ4K ||
                kCombine == Combine::kGgmlSteppedQ2K) {
    return StepStepped<kCombine>(w, x, acc, gemm);
  }
  const __m512i zero = _mm512_setzero_si512();
  __m512i isum = zero;
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    const __m512i init = InLaneOffset(kCombine) != 0 ? x.corr32[c] : zero;
    const __m512i p = _mm512_dpbusd_epi32(init, w.q[c], x.q[c]);
    if constexpr (kCombine == Combine::kGgmlIq4xs) {
      isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, w.scale[c]));
    } else {
      isum = _mm512_dpwssd_epi32(isum, p, w.scale[c]);
    }
  }
  if constexpr (kCombine == Combine::kGgmlQ5K) {
    const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(isum),
                                           _mm512_extracti64x4_epi64(isum, 1));
    const __m128i prod = _mm_madd_epi16(w.mins8, x.sums8);
    const __m256 acc8 =
        _mm256_fmadd_ps(_mm256_set1_ps(x.d * w.d), _mm256_cvtepi32_ps(lanes),
                        _mm512_castps512_ps256(acc));
    const float dmin = -x.d * w.dmin;
    const __m128i h = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
    const int32_t sum = _mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1);
    const __m128 tail =
        _mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(sum)),
                     _mm512_extractf32x4_ps(acc, 2));
    return _mm512_insertf32x4(_mm512_zextps256_ps512(acc8), tail, 2);
  } else if constexpr (IsLanes8(kCombine)) {
    // acc holds 8 lanes in its low half; the high half stays zero.
    __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(isum),
                                     _mm512_extracti64x4_epi64(isum, 1));
    if constexpr (kCombine == Combine::kGgmlQ6K) {
      const __m256i offset =
          _mm256_slli_epi32(_mm256_madd_epi16(w.scales16, x.bsums16), 5);
      lanes = _mm256_sub_epi32(lanes, offset);
    }
    const __m256 acc8 =
        _mm256_fmadd_ps(_mm256_set1_ps(x.d * w.d), _mm256_cvtepi32_ps(lanes),
                        _mm512_castps512_ps256(acc));
    return _mm512_zextps256_ps512(acc8);
  }
  return acc;
}

inline float HSum512(__m512 v) {
  const __m256 h =
      _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A row's result from its accumulator (see Combine).
template <Combine kCombine>
inline float Finish(__m512 acc) {
  if constexpr (kCombine == Combine::kGgmlQ5K) {
    const __m256 a8 = _mm512_castps512_ps256(acc);
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    const __m128 m = _mm512_extractf32x4_ps(acc, 2);
    return _mm_cvtss_f32(s) + _mm_cvtss_f32(m);
  } else if constexpr (kCombine == Combine::kGgmlSteppedQ4K ||
                       kCombine == Combine::kGgmlSteppedQ2K) {
    const __m128 v = _mm512_castps512_ps128(acc);
    return _mm_cvtss_f32(v) - _mm_cvtss_f32(_mm_movehdup_ps(v));
  } else {
    return HSum512(acc);
  }
}

using UnpackFn = void (*)(const std::byte* blk, PackedW* w);

// Rows and tokens per tile of the many-token path; a row tile's packed
// super-blocks are reused by every token tile.
constexpr int kRowTile = 4;
constexpr int kTokenTile = 4;
// Packed activations kept hot while a thread walks its rows.
constexpr int64_t kTokenChunkBytes = 384 * 1024;

// Whether token t of `a` is in the kGemm order.
inline bool IsGemm(const MatMulArgs& a, int64_t t) {
  return a.orders != nullptr && a.orders[t] == DotOrder::kGemm;
}

// One token (decode): each row is read once, in address order.
template <UnpackFn kUnpack, int kBytes, Combine kCombine>
void RowsOneToken(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<PackedX> xs;
  xs.resize(nb);
  for (int64_t b = 0; b < nb; ++b)
    PackX<kCombine>(a.x + b * q8_k::kBytes, &xs[b]);
  const bool gemm = IsGemm(a, 0);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* row = a.w + r * a.w_row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      // Every cache line of the same super-block of the next row (the
      // prefetchers stop at 4 KiB pages; rows are often about one page).
      const char* next =
          reinterpret_cast<const char*>(row + a.w_row_bytes) + b * kBytes;
#pragma GCC unroll 4
      for (int line = 0; line <= kBytes / 64; ++line) {
        _mm_prefetch(next + 64 * line, _MM_HINT_T0);
      }
      PackedW w;
      kUnpack(row + b * kBytes, &w);
      acc = Step<kCombine>(w, xs[b], acc, gemm);
    }
    a.y[r] = Finish<kCombine>(acc);
  }
}

// Tokens [t0, t0 + T) of `a`; x and y start at token t0.
template <Combine kCombine, int R, int T>
void TileMany(const PackedW* w, const PackedX* x, int64_t nb, int64_t x_stride,
              const MatMulArgs& a, int64_t t0, float* y, int64_t y_stride) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][t] = Step<kCombine>(w[r * nb + b], x[t * x_stride + b],
                                   acc[r][t], IsGemm(a, t0 + t));
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      y[t * y_stride + r] = Finish<kCombine>(acc[r][t]);
    }
  }
}

// Rows [r0, r0 + R) against tokens [t0, t1) of the packed chunk.
template <Combine kCombine, int R>
void RowTile(const PackedW* w, const PackedX* xs, int64_t nb, int64_t t0,
             int64_t t1, int64_t chunk_begin, const MatMulArgs& a, int64_t r0) {
  int64_t t = t0;
  for (; t + kTokenTile <= t1; t += kTokenTile) {
    TileMany<kCombine, R, kTokenTile>(w, xs + (t - chunk_begin) * nb, nb, nb, a,
                                      t, a.y + t * a.y_stride + r0, a.y_stride);
  }
  for (; t < t1; ++t) {
    TileMany<kCombine, R, 1>(w, xs + (t - chunk_begin) * nb, nb, nb, a, t,
                             a.y + t * a.y_stride + r0, a.y_stride);
  }
}

template <UnpackFn kUnpack, int kBytes, Combine kCombine>
void RowsManyTokens(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<PackedX> xs;
  thread_local std::vector<PackedW> ws;
  ws.resize(kRowTile * nb);
  int64_t chunk = kTokenChunkBytes / (nb * int64_t{sizeof(PackedX)});
  chunk = chunk < kTokenTile ? kTokenTile : chunk / kTokenTile * kTokenTile;
  for (int64_t tc = 0; tc < a.num_tokens; tc += chunk) {
    const int64_t te = tc + chunk < a.num_tokens ? tc + chunk : a.num_tokens;
    xs.resize((te - tc) * nb);
    for (int64_t t = tc; t < te; ++t) {
      for (int64_t b = 0; b < nb; ++b) {
        PackX<kCombine>(a.x + t * a.x_row_bytes + b * q8_k::kBytes,
                        &xs[(t - tc) * nb + b]);
      }
    }
    for (int64_t r = row_begin; r < row_end;) {
      const int rows = row_end - r >= kRowTile ? kRowTile : 1;
      for (int i = 0; i < rows; ++i) {
        const std::byte* row = a.w + (r + i) * a.w_row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
          kUnpack(row + b * kBytes, &ws[i * nb + b]);
        }
      }
      if (rows == kRowTile) {
        RowTile<kCombine, kRowTile>(ws.data(), xs.data(), nb, tc, te, tc, a, r);
      } else {
        RowTile<kCombine, 1>(ws.data(), xs.data(), nb, tc, te, tc, a, r);
      }
      r += rows;
    }
  }
}

template <UnpackFn kUnpack, int kBytes, Combine kCombine>
void MatMulRowsK(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    RowsOneToken<kUnpack, kBytes, kCombine>(a, row_begin, row_end);
  } else {
    RowsManyTokens<kUnpack, kBytes, kCombine>(a, row_begin, row_end);
  }
}

}  // namespace

void QuantizeRowQ8_KAvx512(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    std::byte* y = out + b * q8_k::kBytes;
    std::memset(y, 0, q8_k::kBytes);
    // max_ps returns its second operand for a NaN: NaNs are skipped, as
    // the scalar reference's `>` does.
    __m512 amax16 = _mm512_setzero_ps();
    for (int i = 0; i < kBlockK / 16; ++i) {
      amax16 =
          _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)), amax16);
    }
    const float amax = _mm512_reduce_max_ps(amax16);
    if (amax == 0.0f) continue;
    float max = 0.0f;  // the first value of the largest magnitude
    for (int i = 0; i < kBlockK / 16; ++i) {
      const __mmask16 at =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)),
                             _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (at != 0) {
        max = x[16 * i + __builtin_ctz(at)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    int16_t bsums[16];
    for (int g = 0; g < 16; ++g) {
      // Round half to even (MXCSR's default), then at most 127.
      const __m512i q = _mm512_min_epi32(
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_set1_ps(iscale),
                                           _mm512_loadu_ps(x + 16 * g))),
          _mm512_set1_epi32(127));
      // As int8 (a NaN's INT_MIN becomes 0, as in the reference); the
      // block sum is of those bytes.
      const __m128i q8 = _mm512_cvtepi32_epi8(q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + q8_k::kQs + 16 * g), q8);
      bsums[g] = static_cast<int16_t>(
          _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q8)));
    }
    std::memcpy(y + q8_k::kBsums, bsums, sizeof(bsums));
    const float d = 1.0f / iscale;
    std::memcpy(y + q8_k::kD, &d, sizeof(d));
  }
}

void MatMulRowsQ2KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ23K<false>, q2_k::kBytes, Combine::kGgmlSteppedQ2K>(a, b,
                                                                         e);
}
void MatMulRowsQ3KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ23K<true>, q3_k::kBytes, Combine::kGgmlQ3K>(a, b, e);
}
void MatMulRowsQ4KPerRowAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ45K<false>, q4_k::kBytes, Combine::kGgmlSteppedQ4K>(a, b,
                                                                         e);
}
void MatMulRowsQ5KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ45K<true>, q5_k::kBytes, Combine::kGgmlQ5K>(a, b, e);
}
void MatMulRowsIq4xsAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackIq4xs, iq4_xs::kBytes, Combine::kGgmlIq4xs>(a, b, e);
}
void MatMulRowsQ6KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ6K, q6_k::kBytes, Combine::kGgmlQ6K>(a, b, e);
}

}  // namespace kvault::kernels

#endif
