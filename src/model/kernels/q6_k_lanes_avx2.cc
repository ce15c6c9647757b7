// AVX2 Q6_K MatMul with 8 weight rows in the 8 int32 lanes of a ymm. Q6_K
// keeps its f16 d at the end of the 210-byte block, so WeightLayout::
// kGroups16 (head bytes first, dwords after) does not fit it: each 8-row
// super-block is transposed on the fly from the file's rows into an L1
// buffer, once for all the tokens of a chunk.
//
// The float order is the scalar DotQ6KQ8K's (llama.cpp's x86 vec_dot):
// per row and super-block 8 exact int32 lanes, lane m holding values
// 32c + 4m .. + 3 of every 32-value chunk c times their sub-block scale,
// minus 32 * (scale[2m] * bsum[2m] + scale[2m + 1] * bsum[2m + 1]); then
// acc[m] = fma(d * dx, lane m, acc[m]) and ggml's 8-way sum of acc. Here
// each row's lane m is one int32 lane of a ymm (8 rows), acc[m] a ymm per
// m, and the final sum adds those ymm in ggml's order, so every row runs
// the scalar float sequence bit for bit. A lane's values (q + 32 in 0..63)
// against a broadcast x dword: vpmaddubsw (|63 * 128 * 2| < 32768, no
// saturation), then vpmaddwd against the int8 scale as int16.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

constexpr int kLanes = 8;                       // rows per ymm
constexpr int kUnits = 64;                      // 4-value units per block
constexpr int kQhDword = q6_k::kQh / 4;         // 32
constexpr int kScaleDword = q6_k::kScales / 4;  // 48
constexpr int kSbDwords = kScaleDword + 4;      // ql, qh, scales
constexpr int kTokenTile = 4;
constexpr int64_t kXChunkBytes = 256 * 1024;  // activations kept hot in L2
constexpr int64_t kMaxChunkTokens = 256;
constexpr int64_t kPrefetchSbs = 2;  // one token: super-blocks ahead

// One super-block of 8 rows, unpacked.
struct HalfSb {
  __m256i q[kUnits];   // unit 8c + m, lane r: row r's values 32c + 4m .. + 3
  __m256i scale[16];   // lane r: row r's scale g, both int16 halves
  __m256i offpair[8];  // lane r: int16 pair [scale 2m, scale 2m + 1]
  __m256 d;
};

// The float accumulators of 8 rows for one token: acc[m] per lane m.
struct Acc {
  __m256 acc[8];
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

inline __m256i Load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline uint16_t HalfBits(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

// ggml's 8-lane sum ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline float HSum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// acc[t] (8 rows) += the super-block `w` for tokens t < T, whose Q8_K
// blocks are at xb[t].
template <int T>
inline __attribute__((always_inline)) void StepSb(const HalfSb& w,
                                                  const std::byte* const* xb,
                                                  Acc* const* acc) {
  __m256 dd[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float dx;
    std::memcpy(&dx, xb[t] + q8_k::kD, sizeof(dx));
    dd[t] = _mm256_mul_ps(w.d, _mm256_set1_ps(dx));
  }
#pragma GCC unroll 1
  for (int m = 0; m < 8; ++m) {
    __m256i lane[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) lane[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i q = w.q[8 * c + m];
      const __m256i s = w.scale[2 * c + m / 4];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i x = BroadcastDword(xb[t] + q8_k::kQs + 32 * c + 4 * m);
        lane[t] = _mm256_add_epi32(
            lane[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), s));
        KeepChain(lane[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i bs = BroadcastDword(xb[t] + q8_k::kBsums + 4 * m);
      const __m256i off =
          _mm256_slli_epi32(_mm256_madd_epi16(w.offpair[m], bs), 5);
      lane[t] = _mm256_sub_epi32(lane[t], off);
      acc[t]->acc[m] =
          _mm256_fmadd_ps(dd[t], _mm256_cvtepi32_ps(lane[t]), acc[t]->acc[m]);
    }
  }
}

// Tokens [tc, te) against super-block b, acc[t - tc].
void StepTokens(const MatMulArgs& a, const HalfSb& w, int64_t tc, int64_t te,
                int64_t b, Acc* acc) {
  int64_t t = tc;
  for (; t + kTokenTile <= te; t += kTokenTile) {
    const std::byte* xb[kTokenTile];
    Acc* ac[kTokenTile];
    for (int i = 0; i < kTokenTile; ++i) {
      xb[i] = a.x + (t + i) * a.x_row_bytes + b * q8_k::kBytes;
      ac[i] = acc + (t + i - tc);
    }
    StepSb<kTokenTile>(w, xb, ac);
  }
  for (; t < te; ++t) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * q8_k::kBytes;
    Acc* ac = acc + (t - tc);
    StepSb<1>(w, &xb, &ac);
  }
}

// y[t, r0 .. r0 + num_rows) = ggml's 8-way sum of acc.
void StoreRows(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
               const Acc& acc) {
  const __m256* v = acc.acc;
  const __m256 y = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
      _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
  float* out = a.y + t * a.y_stride + r0;
  if (num_rows == kLanes) {
    _mm256_storeu_ps(out, y);
    return;
  }
  alignas(32) float tmp[kLanes];
  _mm256_store_ps(tmp, y);
  std::memcpy(out, tmp, num_rows * sizeof(float));
}

// Rows [r0, r0 + num_rows) (num_rows <= 8) for tokens [tc, te).
void RowsTokens(const MatMulArgs& a, int64_t r0, int num_rows, int64_t tc,
                int64_t te, Acc* acc, HalfSb* w) {
  const int64_t nb = a.cols / kBlockK;
  const std::byte* rows = a.w + r0 * a.w_row_bytes;
  Acc zero;
  for (__m256& v : zero.acc) v = _mm256_setzero_ps();
  std::fill(acc, acc + (te - tc), zero);
  for (int64_t b = 0; b < nb; ++b) {
    if (b + kPrefetchSbs < nb) {  // 8 row streams: help the prefetchers
      const char* ahead = reinterpret_cast<const char*>(
          rows + (b + kPrefetchSbs) * q6_k::kBytes);
      for (int r = 0; r < num_rows; ++r) {
        for (int line = 0; line < q6_k::kBytes; line += 64) {
          _mm_prefetch(ahead + r * a.w_row_bytes + line, _MM_HINT_T0);
        }
      }
    }
    PackHalfSb(rows + b * q6_k::kBytes, a.w_row_bytes, num_rows, w);
    StepTokens(a, *w, tc, te, b, acc);
  }
  for (int64_t t = tc; t < te; ++t) StoreRows(a, t, r0, num_rows, acc[t - tc]);
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

// Register c's scales: int16 k = 2 (c % 4) of `src` (the block's 8 low or
// high scales in both lanes) in the low lane, k + 1 in the high one.
inline __m256i RegScales(__m256i src, int c) {
  const int8_t k = static_cast<int8_t>(2 * (c % 4));
  const int8_t lo0 = 2 * k, lo1 = 2 * k + 1, hi0 = 2 * k + 2, hi1 = 2 * k + 3;
  return _mm256_shuffle_epi8(
      src,
      _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0,
                       lo1, lo0, lo1, lo0, lo1, hi0, hi1, hi0, hi1, hi0, hi1,
                       hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1));
}

float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb) {
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
        lanes = _mm256_add_epi32(lanes,
                                 _mm256_madd_epi16(p16, RegScales(sc8[n], c)));
        KeepChain(lanes);
      }
    }
    // Lane m: - 32 * (scale 2m * bsum 2m + scale 2m + 1 * bsum 2m + 1).
    const __m256i off = _mm256_madd_epi16(sc16, Load256(xb + q8_k::kBsums));
    lanes = _mm256_sub_epi32(lanes, _mm256_slli_epi32(off, 5));
    float dx;
    std::memcpy(&dx, xb + q8_k::kD, sizeof(dx));
    const float d = _cvtsh_ss(HalfBits(blk + q6_k::kD));
    acc =
        _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(lanes), acc);
  }
  return HSum8(acc);
}

}  // namespace

void MatMulRowsQ6KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  if (a.num_tokens == 1) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      a.y[r] = DecodeRow(a.w + r * a.w_row_bytes, a.x, a.cols / kBlockK);
    }
    return;
  }
  int64_t chunk = kXChunkBytes / static_cast<int64_t>(a.x_row_bytes);
  chunk = std::clamp<int64_t>(chunk / kTokenTile * kTokenTile, kTokenTile,
                              kMaxChunkTokens);
  thread_local std::vector<Acc> acc;
  thread_local std::vector<HalfSb> w(1);
  acc.resize(chunk);
  for (int64_t tc = 0; tc < a.num_tokens; tc += chunk) {
    const int64_t te = std::min(tc + chunk, a.num_tokens);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kLanes) {
      const int rows =
          static_cast<int>(std::min<int64_t>(kLanes, row_end - r0));
      RowsTokens(a, r0, rows, tc, te, acc.data(), w.data());
    }
  }
}

}  // namespace kvault::kernels

#endif
