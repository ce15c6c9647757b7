// AVX2 Q4_0 (and IQ4_NL, below) MatMul with weight rows in the int32
// lanes: a 16-row group is
// two ymm halves of 8 rows (the halves of WeightLayout::kGroups16's
// dwords, or transposed on the fly from kRows). Compiled with -mavx2 -mfma
// -mf16c and called only after CPU detection (intrinsics and
// internal-linkage helpers only; see kernel_table.h).
//
// Per half and 32-value block b, eight ymm hold the rows' nibbles:
// register k, lane r = values 4k .. 4k + 3 of row r (as stored, 0..15). A
// token's four int8 x values for the same positions are one broadcast
// dword, so one vpmaddubsw advances 8 rows by 4 products (two int16 pair
// sums per lane). The eight registers' pair sums add up in int16 without
// overflow (|8 * 2 * 15 * 128| < 2^15), and one vpmaddwd makes them int32:
//   isum = -8 * sum(x_b) + vpmaddwd(sum_k vpmaddubsw(w_k, bcast(x_k)), 1)
//   acc  = fma(float(isum), dw * dx, acc)            per row lane, in order
// which is the scalar reference DotRowQ4_0 (and llama.cpp's repacked Q4_0
// order, the same in its AVX2 and AVX-512 builds) bit for bit, for one
// token or many and for any thread split (see kernels.h).
//
// IQ4_NL (kRows only) is the same block shape and the same sequential
// order (DotIq4nlSequential): its registers hold the levels the nibbles
// index (signed, -127 .. 113) and their magnitudes, and since one
// vpmaddubsw of those can reach 2 * 127 * 127, each register's pair sums
// go to int32 at once (vpmaddwd) before they are added:
//   isum = sum_k vpmaddwd(vpmaddubsw(|w_k|, sign(bcast(x_k), w_k)), 1)
// One token of it was compute-bound on one row at a time.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/quant_blocks.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_avx2.inc"

constexpr int kGroupRows = 16;  // rows per group: two halves of 8 lanes
constexpr int kHalfRows = 8;
constexpr int64_t kQ4Bytes = 18;  // f16 d + 16 nibble bytes
constexpr int64_t kQ8Bytes = 34;  // f16 d + 32 int8
constexpr int64_t kBlock = 32;
constexpr int kTokenTile = 4;           // tokens sharing a packed block
constexpr int64_t kTokenChunk = 128;    // tokens whose x stays in cache
constexpr int64_t kPrefetchBlocks = 8;  // kGroups16 decode: blocks ahead

// The block types this file reads.
enum class LanesType { kQ4_0, kIq4nl };

// One block of a 16-row group.
template <LanesType kType>
struct GroupBlock {
  __m256i w[2][8];  // [half][k]: lane r = values 4k .. 4k+3 of row 8h + r
  __m256 dw[2];     // [half]: lane r = row 8h + r's scale
};

template <>
struct GroupBlock<LanesType::kIq4nl> {
  __m256i w[2][8];    // the levels
  __m256i abs[2][8];  // their magnitudes
  __m256 dw[2];
};

// One token's block: the correction and the scale.
struct TokenBlock {
  int32_t corr;  // Q4_0: -8 * sum(x)
  float dx;
};

// Splits dword j's nibbles into registers j (low) and j + 4 (high): as
// stored (Q4_0) or the IQ4_NL levels they index, with their magnitudes.
template <LanesType kType>
inline __attribute__((always_inline)) void SplitNibbles(const __m256i t[4],
                                                        GroupBlock<kType>* g,
                                                        int h) {
  __m256i* w = g->w[h];
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    w[j] = _mm256_and_si256(t[j], m4);
    w[j + 4] = _mm256_and_si256(_mm256_srli_epi16(t[j], 4), m4);
  }
  if constexpr (kType == LanesType::kIq4nl) {
    const __m256i levels = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      w[k] = _mm256_shuffle_epi8(levels, w[k]);
      g->abs[h][k] = _mm256_sign_epi8(w[k], w[k]);
    }
  }
}

// kRows: block b of rows [r0, r0 + num_rows) (missing rows read as zeros).
template <LanesType kType>
inline __attribute__((always_inline)) void PackRowsBlock(const MatMulArgs& a,
                                                         int64_t r0,
                                                         int num_rows,
                                                         int64_t b,
                                                         GroupBlock<kType>* g) {
  const std::byte* base = a.w + r0 * a.w_row_bytes + b * kQ4Bytes;
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const int n = num_rows - kHalfRows * h;
    const std::byte* half = base + kHalfRows * h * a.w_row_bytes;
    __m256i t[4];
    Transpose8x4Dwords(half + 2, a.w_row_bytes, n, t);
    SplitNibbles<kType>(t, g, h);
    alignas(16) uint16_t d[kHalfRows] = {};
    for (int r = 0; r < n && r < kHalfRows; ++r) {
      std::memcpy(&d[r], half + r * a.w_row_bytes, sizeof(d[r]));
    }
    g->dw[h] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<__m128i*>(d)));
  }
}

// kGroups16: block b of the group is one unit of 16 f16 scales, then
// dword j of row r at 4 * (16 * j + r), so half h of dword j is 32 bytes.
inline __attribute__((always_inline)) void LoadUnit(
    const std::byte* unit, GroupBlock<LanesType::kQ4_0>* g) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    g->dw[h] = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + 16 * h)));
    __m256i t[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(unit + 32 + 64 * j + 32 * h));
    }
    SplitNibbles<LanesType::kQ4_0>(t, g, h);
  }
}

template <LanesType kType, bool kGroups16>
inline __attribute__((always_inline)) void PackBlock(const MatMulArgs& a,
                                                     int64_t r0, int num_rows,
                                                     int64_t b,
                                                     GroupBlock<kType>* g) {
  if constexpr (kGroups16) {
    static_assert(kType == LanesType::kQ4_0, "IQ4_NL reads kRows only");
    LoadUnit(a.w + r0 * a.w_row_bytes + b * kGroupRows * kQ4Bytes, g);
  } else {
    PackRowsBlock<kType>(a, r0, num_rows, b, g);
  }
}

// Token t's corrections (Q4_0) and scales for every block.
template <LanesType kType>
void PackTokenBlocks(const MatMulArgs& a, int64_t t, TokenBlock* out) {
  const int64_t nb = a.cols / kBlock;
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * kQ8Bytes;
    out[b].dx = HalfAt(xb);
    if constexpr (kType == LanesType::kIq4nl) {
      out[b].corr = 0;
      continue;
    }
    const __m256i xq =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
    const __m256i s =
        _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xq), ones16);
    out[b].corr = -8 * HSumI32(s);
  }
}

// The int32 block sums of half h's 8 rows with one token's x quants.
template <LanesType kType>
inline __attribute__((always_inline)) void BlockSums(const GroupBlock<kType>& g,
                                                     const std::byte* xq,
                                                     __m256i isum[2]) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  if constexpr (kType == LanesType::kQ4_0) {
    __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      int32_t x4;
      std::memcpy(&x4, xq + 4 * k, sizeof(x4));
      const __m256i xk = _mm256_set1_epi32(x4);
      s16[0] = _mm256_add_epi16(s16[0], _mm256_maddubs_epi16(g.w[0][k], xk));
      s16[1] = _mm256_add_epi16(s16[1], _mm256_maddubs_epi16(g.w[1][k], xk));
    }
    isum[0] = _mm256_madd_epi16(s16[0], ones16);
    isum[1] = _mm256_madd_epi16(s16[1], ones16);
  } else {
    isum[0] = isum[1] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      int32_t x4;
      std::memcpy(&x4, xq + 4 * k, sizeof(x4));
      const __m256i xk = _mm256_set1_epi32(x4);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i p16 =
            _mm256_maddubs_epi16(g.abs[h][k], _mm256_sign_epi8(xk, g.w[h][k]));
        isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(p16, ones16));
      }
    }
  }
}

// acc[t][h] += block b of half h for tokens [t0, t0 + T).
template <LanesType kType, int T>
inline __attribute__((always_inline)) void StepTokens(
    const GroupBlock<kType>& g, const MatMulArgs& a, const TokenBlock* tok,
    int64_t nb, int64_t t0, int64_t chunk_begin, int64_t b,
    __m256 (&acc)[T][2]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const int64_t tt = t0 + t;
    const TokenBlock& tb = tok[(tt - chunk_begin) * nb + b];
    const std::byte* xq = a.x + tt * a.x_row_bytes + b * kQ8Bytes + 2;
    __m256i isum[2];
    BlockSums<kType>(g, xq, isum);
    const __m256 dx = _mm256_set1_ps(tb.dx);
    const __m256i corr = _mm256_set1_epi32(tb.corr);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      if constexpr (kType == LanesType::kQ4_0) {
        isum[h] = _mm256_add_epi32(corr, isum[h]);
      }
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]),
                                  _mm256_mul_ps(g.dw[h], dx), acc[t][h]);
    }
  }
}

// Stores lanes [0, num_rows) of the two halves to y + r0.
inline void StoreRows(const __m256 acc[2], int num_rows, float* y) {
  if (num_rows == kGroupRows) {
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + kHalfRows, acc[1]);
    return;
  }
  alignas(32) float out[kGroupRows];
  _mm256_store_ps(out, acc[0]);
  _mm256_store_ps(out + kHalfRows, acc[1]);
  std::memcpy(y, out, sizeof(float) * num_rows);
}

template <LanesType kType, int T>
void GroupTokens(const GroupBlock<kType>* packed, const MatMulArgs& a,
                 const TokenBlock* tok, int64_t nb, int64_t t0,
                 int64_t chunk_begin, int64_t r0, int num_rows) {
  __m256 acc[T][2];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    StepTokens<kType, T>(packed[b], a, tok, nb, t0, chunk_begin, b, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    StoreRows(acc[t], num_rows, a.y + (t0 + t) * a.y_stride + r0);
  }
}

// One token, one group: blocks are unpacked as they are used, and the
// group's bytes are fetched ahead as one stream.
template <LanesType kType, bool kGroups16>
void GroupOneToken(const MatMulArgs& a, const TokenBlock* tok, int64_t nb,
                   int64_t r0, int num_rows) {
  __m256 acc[1][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
  for (int64_t b = 0; b < nb; ++b) {
    const uintptr_t next =
        reinterpret_cast<uintptr_t>(a.w) + r0 * a.w_row_bytes +
        (kGroups16 ? (b + kPrefetchBlocks) * kGroupRows * kQ4Bytes
                   : kGroupRows * a.w_row_bytes + b * kGroupRows * kQ4Bytes);
#pragma GCC unroll 5
    for (int line = 0; line < 5; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(next + 64 * line),
                   _MM_HINT_T0);
    }
    GroupBlock<kType> g;
    PackBlock<kType, kGroups16>(a, r0, num_rows, b, &g);
    StepTokens<kType, 1>(g, a, tok, nb, 0, 0, b, acc);
  }
  StoreRows(acc[0], num_rows, a.y + r0);
}

template <LanesType kType, bool kGroups16>
void RowsOneToken(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlock;
  thread_local std::vector<TokenBlock> tok;
  tok.resize(nb);
  PackTokenBlocks<kType>(a, 0, tok.data());
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    if (row_end - r0 >= kGroupRows) {
      GroupOneToken<kType, kGroups16>(a, tok.data(), nb, r0, kGroupRows);
    } else {  // a partial group is never kGroups16 (rows % 16 == 0 there)
      GroupOneToken<kType, false>(a, tok.data(), nb, r0,
                                  static_cast<int>(row_end - r0));
    }
  }
}

template <LanesType kType, bool kGroups16>
void RowsManyTokens(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlock;
  thread_local std::vector<TokenBlock> tok;
  thread_local std::vector<GroupBlock<kType>> packed;
  packed.resize(nb);
  for (int64_t tc = 0; tc < a.num_tokens; tc += kTokenChunk) {
    const int64_t te =
        tc + kTokenChunk < a.num_tokens ? tc + kTokenChunk : a.num_tokens;
    tok.resize((te - tc) * nb);
    for (int64_t t = tc; t < te; ++t) {
      PackTokenBlocks<kType>(a, t, tok.data() + (t - tc) * nb);
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
      const int num_rows = static_cast<int>(
          row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows);
      for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kGroups16) {
          if (num_rows == kGroupRows) {
            PackBlock<kType, true>(a, r0, num_rows, b, &packed[b]);
            continue;
          }
        }
        PackBlock<kType, false>(a, r0, num_rows, b, &packed[b]);
      }
      int64_t t = tc;
      for (; t + kTokenTile <= te; t += kTokenTile) {
        GroupTokens<kType, kTokenTile>(packed.data(), a, tok.data(), nb, t, tc,
                                       r0, num_rows);
      }
      for (; t < te; ++t) {
        GroupTokens<kType, 1>(packed.data(), a, tok.data(), nb, t, tc, r0,
                              num_rows);
      }
    }
  }
}

template <LanesType kType, bool kGroups16>
void MatMulRowsLanes(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.num_tokens == 1) {
    RowsOneToken<kType, kGroups16>(a, row_begin, row_end);
  } else {
    RowsManyTokens<kType, kGroups16>(a, row_begin, row_end);
  }
}

}  // namespace

void MatMulRowsQ4_0LanesAvx2(const MatMulArgs& a, int64_t row_begin,
                             int64_t row_end) {
  MatMulRowsLanes<LanesType::kQ4_0, false>(a, row_begin, row_end);
}

void MatMulRowsQ4_0Groups16Avx2(const MatMulArgs& a, int64_t row_begin,
                                int64_t row_end) {
  MatMulRowsLanes<LanesType::kQ4_0, true>(a, row_begin, row_end);
}

void MatMulRowsIq4nlLanesAvx2(const MatMulArgs& a, int64_t row_begin,
                              int64_t row_end) {
  MatMulRowsLanes<LanesType::kIq4nl, false>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
