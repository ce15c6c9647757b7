// AVX-512 VNNI MatMul kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K) against Q8_K activations. Compiled with -mavx512* and called only
// after CPU detection (see kernel_table.h: intrinsics and internal-linkage
// helpers only).
//
// Each weight super-block is unpacked into four zmm of 64 unsigned values
// in natural order (Q3_K and Q6_K offset to unsigned: q + 4, q + 32), the
// per-16 scales spread over int32 lanes, and a float vector of per-16
// "min" terms. Per (row, token, super-block):
//   p_c   = vpdpbusd(0, w_c, x_c)        4 products per int32 lane; every
//                                        lane fits in int16 (|p| < 2^15)
//   isum  = sum_c vpdpwssd(p_c, [s, 0])  lane * its 16-value group's scale
//   acc  += float(isum) * (d * dx) - mins * (dx * bsums)
// The integer part is exact; the offsets of Q3_K/Q6_K come back through the
// Q8_K block sums (value = d * s * (u - k): subtract d * k * s * bsum). A
// row's result is the fixed-order horizontal sum of its 16 lanes, so every
// output element depends only on its row and its token.
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
  __m512 mins;              // per 16-value group: the term times dx * bsum
  __m128i mins8;            // Q4_K/Q5_K: the 8 sub-block mins as int16
  float d;
  float dmin;  // Q4_K/Q5_K
};

// One activation super-block.
struct PackedX {
  __m512i q[kSubRegs];
  __m512i corr32[kSubRegs];  // -32 * (sum of each lane's 4 values)
  __m512 bsums;              // dx * bsum per 16-value group
  __m128i sums8;  // int16 sums of each 32-value sub-block (bsum pairs)
  float d;
};

// How a super-block's integer lanes become floats.
enum class Combine {
  // 16 lanes; offsets and mins through the block sums (a float term).
  kMins,
  // Q5_K as ggml's AVX2 vec_dot sums it: the scales' int32 lanes folded
  // to 8 (i and i + 8) and acc8 = fma(dx * d, lanes, acc8) per super-block;
  // the mins' integer sum (sub-block mins times bsum pairs) into a scalar,
  // summs = summs + (-dx * dmin) * sum (two roundings), kept in lane 8;
  // result hsum8(acc8) + summs. (Q4_K is not summed this way: ggml
  // repacks it for batches, in another order.)
  kGgmlQ5K,
  // Q6_K in the order of ggml's AVX2 vec_dot source: the -32 offset
  // inside each int32 lane, lanes i and i + 8 added (8 lanes, each 4
  // values of every 32-value chunk), then acc8 = fma(dx * d, lanes, acc8)
  // per super-block and an 8-lane horizontal sum. (The prebuilt llama.cpp
  // b10573 sums Q6_K in yet another order: only ~30% of rows agree bit
  // for bit; see issue 18.) llama.cpp's greedy outputs on small models
  // flip with the last bit of such sums (fp16 roundings of K/V and Q).
  kGgmlLanes8,
};

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
// Group g of 16 values takes the min of sub-block g / 2, which sits in lane
// 8 + g / 2 of the [scales | mins] vector of Q4_K/Q5_K.
alignas(64) constexpr int32_t kMinOfGroup[16] = {
    8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};

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
  if constexpr (kQ5) {  // Combine::kGgmlQ5K reads the mins as int16
    w->mins8 = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm_bytes, sm_bytes));
  } else {  // Combine::kMins reads them per 16-value group, scaled
    w->mins = _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(LoadIdx(kMinOfGroup), sm)),
        _mm512_set1_ps(w->dmin));
  }
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
  // value = d * s * (u - 32): Combine::kGgmlLanes8 takes the offset inside
  // the integer lanes, so no float min term is needed.
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
    w->mins = _mm512_mul_ps(_mm512_cvtepi32_ps(s16), _mm512_set1_ps(4 * w->d));
  } else {
    const __m512i packed = _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q2_k::kScales)));
    SpreadScales(_mm512_and_si512(packed, _mm512_set1_epi32(0x0F)), w);
    w->d = HalfAt(blk + q2_k::kD);
    w->mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(packed, 4)),
                            _mm512_set1_ps(HalfAt(blk + q2_k::kDmin)));
  }
}

// Packs one activation super-block with what `kCombine` reads: the block
// sums as floats (kMins), the offset correction (kGgmlLanes8) or the
// sub-block sums (kGgmlQ5K).
template <Combine kCombine>
void PackX(const std::byte* xb, PackedX* x) {
  for (int c = 0; c < kSubRegs; ++c) {
    x->q[c] = _mm512_loadu_si512(xb + q8_k::kQs + 64 * c);
  }
  std::memcpy(&x->d, xb + q8_k::kD, sizeof(float));
  const __m256i b16 =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q8_k::kBsums));
  if constexpr (kCombine == Combine::kMins) {
    x->bsums = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(b16)),
                             _mm512_set1_ps(x->d));
  } else if constexpr (kCombine == Combine::kGgmlLanes8) {
    const __m512i k32 = _mm512_set1_epi8(32);
    for (int c = 0; c < kSubRegs; ++c) {
      x->corr32[c] = _mm512_sub_epi32(
          _mm512_setzero_si512(),
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), k32, x->q[c]));
    }
  } else {
    x->sums8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                              _mm256_extracti128_si256(b16, 1));
  }
}

// acc += this super-block's contribution for one row and one token.
template <Combine kCombine>
inline __attribute__((always_inline)) __m512 Step(const PackedW& w,
                                                  const PackedX& x,
                                                  __m512 acc) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i isum = zero;
#pragma GCC unroll 4
  for (int c = 0; c < kSubRegs; ++c) {
    const __m512i init = kCombine == Combine::kGgmlLanes8 ? x.corr32[c] : zero;
    const __m512i p = _mm512_dpbusd_epi32(init, w.q[c], x.q[c]);
    isum = _mm512_dpwssd_epi32(isum, p, w.scale[c]);
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
    const __m128 tail = _mm_add_ss(
        _mm512_extractf32x4_ps(acc, 2),
        _mm_mul_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(sum))));
    return _mm512_insertf32x4(_mm512_zextps256_ps512(acc8), tail, 2);
  } else if constexpr (kCombine == Combine::kGgmlLanes8) {
    // acc holds 8 lanes in its low half; the high half stays zero.
    const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(isum),
                                           _mm512_extracti64x4_epi64(isum, 1));
    const __m256 acc8 =
        _mm256_fmadd_ps(_mm256_set1_ps(x.d * w.d), _mm256_cvtepi32_ps(lanes),
                        _mm512_castps512_ps256(acc));
    return _mm512_zextps256_ps512(acc8);
  } else {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(w.d * x.d),
                          acc);
    return _mm512_fnmadd_ps(w.mins, x.bsums, acc);
  }
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

// One token (decode): each row is read once, in address order.
template <UnpackFn kUnpack, int kBytes, Combine kCombine>
void RowsOneToken(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<PackedX> xs;
  xs.resize(nb);
  for (int64_t b = 0; b < nb; ++b)
    PackX<kCombine>(a.x + b * q8_k::kBytes, &xs[b]);
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
      acc = Step<kCombine>(w, xs[b], acc);
    }
    a.y[r] = Finish<kCombine>(acc);
  }
}

template <Combine kCombine, int R, int T>
void TileMany(const PackedW* w, const PackedX* x, int64_t nb, int64_t x_stride,
              float* y, int64_t y_stride) {
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
        acc[r][t] =
            Step<kCombine>(w[r * nb + b], x[t * x_stride + b], acc[r][t]);
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
    TileMany<kCombine, R, kTokenTile>(w, xs + (t - chunk_begin) * nb, nb, nb,
                                      a.y + t * a.y_stride + r0, a.y_stride);
  }
  for (; t < t1; ++t) {
    TileMany<kCombine, R, 1>(w, xs + (t - chunk_begin) * nb, nb, nb,
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

template <UnpackFn kUnpack, int kBytes, Combine kCombine = Combine::kMins>
void MatMulRowsK(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    RowsOneToken<kUnpack, kBytes, kCombine>(a, row_begin, row_end);
  } else {
    RowsManyTokens<kUnpack, kBytes, kCombine>(a, row_begin, row_end);
  }
}

}  // namespace

void MatMulRowsQ2KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ23K<false>, q2_k::kBytes>(a, b, e);
}
void MatMulRowsQ3KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ23K<true>, q3_k::kBytes>(a, b, e);
}
void MatMulRowsQ4KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ45K<false>, q4_k::kBytes>(a, b, e);
}
void MatMulRowsQ5KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ45K<true>, q5_k::kBytes, Combine::kGgmlQ5K>(a, b, e);
}
void MatMulRowsQ6KAvx512(const MatMulArgs& a, int64_t b, int64_t e) {
  MatMulRowsK<UnpackQ6K, q6_k::kBytes, Combine::kGgmlLanes8>(a, b, e);
}

}  // namespace kvault::kernels

#endif
