// AVX-512 VNNI Q4_0 MatMul with 16 weight rows in the 16 int32 lanes of a
// zmm (ggml calls this layout "repacked"; here it is built on the fly from
// the file's own blocks, so no second copy of the weights exists).
//
// Per 16-row group and 32-value block b, eight zmm hold the rows' nibbles:
// register k, lane r = values 4k .. 4k + 3 of row r (as stored, 0..15). A
// token's four int8 x values for the same positions are one broadcast
// dword, so one vpdpbusd advances 16 rows by 4 products, and the block's
// scale step covers the 16 rows at once:
//   isum  = -8 * sum(x_b) + sum_k vpdpbusd(w_k, broadcast(x_b[4k..4k+3]))
//   acc  = fma(float(isum), dw * dx, acc)           per row lane, in order
// so y[t, r] is a plain sequence over the blocks of row r, the same for one
// token (decode) or many, for any thread split (see kernels.h), and equal
// to the scalar reference DotRowQ4_0 bit for bit.
#include "model/kernels/kernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes16_avx512.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvault::kernels {
namespace {

constexpr int kLanes = 16;        // rows per group
constexpr int64_t kQ4Bytes = 18;  // f16 d + 16 nibble bytes
constexpr int64_t kQ8Bytes = 34;  // f16 d + 32 int8
constexpr int64_t kBlock = 32;
constexpr int kTokenTile = 8;           // tokens sharing a block's registers
constexpr int64_t kTokenChunk = 256;    // tokens whose x stays hot in cache
constexpr int64_t kPrefetchBlocks = 8;  // kGroups16 decode: blocks ahead

// One block of a 16-row group.
struct GroupBlock {
  __m512i w[8];  // register k: lane r = values 4k..4k+3 of row r
  __m512 dw;     // lane r: row r's scale
};

// One token's block: the correction and the scale.
struct TokenBlock {
  int32_t corr;  // -8 * sum(x)
  float dx;
};

inline float HalfAt(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Transposes block b of rows [r0, r0 + num_rows) (num_rows <= 16; missing
// rows read as zeros) into `g`. `row_offsets` holds r * w_row_bytes in
// lane r.
template <bool kFull>
inline __attribute__((always_inline)) void PackGroupBlock(
    const MatMulArgs& a, int64_t r0, int num_rows, __m512i row_offsets,
    int64_t b, GroupBlock* g) {
  const std::byte* base = a.w + r0 * a.w_row_bytes + b * kQ4Bytes;
  __m512i t[4];
  Transpose16x4Dwords(base + 2, a.w_row_bytes, kFull ? kLanes : num_rows, t);
  // The scales: one dword gathered from each row's block start.
  const __mmask16 rows =
      kFull ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << num_rows) - 1);
  const __m512i dwords = _mm512_mask_i32gather_epi32(
      _mm512_setzero_si512(), rows, row_offsets, base, 1);
  g->dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dwords));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    g->w[j] = _mm512_and_si512(t[j], m4);  // values 4j .. 4j + 3
    g->w[j + 4] = _mm512_and_si512(_mm512_srli_epi32(t[j], 4), m4);
  }
}

// WeightLayout::kGroups16: block b of the group is one unit of 16 f16
// scales then 4 dwords of 16 rows, already transposed.
inline __attribute__((always_inline)) void LoadGroupBlock(const std::byte* unit,
                                                          GroupBlock* g) {
  g->dw = _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i t = _mm512_loadu_si512(unit + 32 + 64 * j);
    g->w[j] = _mm512_and_si512(t, m4);
    g->w[j + 4] = _mm512_and_si512(_mm512_srli_epi32(t, 4), m4);
  }
}

// Block b of the 16-row group at r0 (kGroups16) or of its num_rows rows.
template <bool kGroups16, bool kFull>
inline __attribute__((always_inline)) void PackBlock(const MatMulArgs& a,
                                                     int64_t r0, int num_rows,
                                                     __m512i row_offsets,
                                                     int64_t b, GroupBlock* g) {
  if constexpr (kGroups16) {
    LoadGroupBlock(a.w + r0 * a.w_row_bytes + b * kLanes * kQ4Bytes, g);
  } else {
    PackGroupBlock<kFull>(a, r0, num_rows, row_offsets, b, g);
  }
}

// Lane r: r * w_row_bytes (the gather offsets of a group's rows).
inline __m512i RowOffsets(const MatMulArgs& a) {
  return _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int32_t>(a.w_row_bytes)));
}

// Prepares token t's corrections and scales for every block.
void PackTokenBlocks(const MatMulArgs& a, int64_t t, TokenBlock* out) {
  const int64_t nb = a.cols / kBlock;
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * kQ8Bytes;
    const __m256i xq =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
    const __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, xq);
    const __m128i s2 = _mm_add_epi32(_mm256_castsi256_si128(s4),
                                     _mm256_extracti128_si256(s4, 1));
    const __m128i s1 = _mm_add_epi32(s2, _mm_unpackhi_epi64(s2, s2));
    const int32_t sum = _mm_cvtsi128_si32(s1) + _mm_extract_epi32(s1, 1);
    out[b].corr = -8 * sum;
    out[b].dx = HalfAt(xb);
  }
}

// acc[t] (16 rows) += block b for tokens [t0, t0 + T).
template <int T>
inline __attribute__((always_inline)) void StepTokens(
    const GroupBlock& g, const MatMulArgs& a, const TokenBlock* tok, int64_t nb,
    int64_t t0, int64_t chunk_begin, int64_t b, __m512 (&acc)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const int64_t tt = t0 + t;
    const TokenBlock& tb = tok[(tt - chunk_begin) * nb + b];
    const std::byte* xq = a.x + tt * a.x_row_bytes + b * kQ8Bytes + 2;
    __m512i isum = _mm512_set1_epi32(tb.corr);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      int32_t x4;
      std::memcpy(&x4, xq + 4 * k, sizeof(x4));
      isum = _mm512_dpbusd_epi32(isum, g.w[k], _mm512_set1_epi32(x4));
    }
    acc[t] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                        _mm512_mul_ps(g.dw, _mm512_set1_ps(tb.dx)), acc[t]);
  }
}

template <int T>
void GroupTokens(const GroupBlock* packed, const MatMulArgs& a,
                 const TokenBlock* tok, int64_t nb, int64_t t0,
                 int64_t chunk_begin, int64_t r0, __mmask16 rows) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    StepTokens<T>(packed[b], a, tok, nb, t0, chunk_begin, b, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + r0, rows, acc[t]);
  }
}

// One token, one group of rows: its blocks are unpacked as they are used.
template <bool kGroups16, bool kFull>
void GroupOneToken(const MatMulArgs& a, const TokenBlock* tok, int64_t nb,
                   __m512i offsets, int64_t r0, int num_rows) {
  __m512 acc[1] = {_mm512_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    {
      // The next group's 16 rows are the next 16 * row_bytes bytes (kRows),
      // or this group's blocks continue as one stream (kGroups16): fetch
      // them sequentially, a block's share per iteration.
      const uintptr_t next =
          reinterpret_cast<uintptr_t>(a.w) + r0 * a.w_row_bytes +
          (kGroups16 ? (b + kPrefetchBlocks) * kLanes * kQ4Bytes
                     : kLanes * a.w_row_bytes + b * kLanes * kQ4Bytes);
#pragma GCC unroll 5
      for (int line = 0; line < 5; ++line) {
        _mm_prefetch(reinterpret_cast<const char*>(next + 64 * line),
                     _MM_HINT_T0);
      }
    }
    GroupBlock g;
    PackBlock<kGroups16, kFull>(a, r0, num_rows, offsets, b, &g);
    StepTokens<1>(g, a, tok, nb, 0, 0, b, acc);
  }
  _mm512_mask_storeu_ps(a.y + r0, static_cast<__mmask16>((1u << num_rows) - 1),
                        acc[0]);
}

template <bool kGroups16>
void RowsOneToken(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlock;
  thread_local std::vector<TokenBlock> tok;
  tok.resize(nb);
  PackTokenBlocks(a, 0, tok.data());
  const __m512i offsets = RowOffsets(a);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kLanes) {
    if (row_end - r0 >= kLanes) {
      GroupOneToken<kGroups16, true>(a, tok.data(), nb, offsets, r0, kLanes);
    } else {
      GroupOneToken<false, false>(a, tok.data(), nb, offsets, r0,
                                  static_cast<int>(row_end - r0));
    }
  }
}

template <bool kGroups16>
void RowsManyTokens(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlock;
  thread_local std::vector<TokenBlock> tok;
  thread_local std::vector<GroupBlock> packed;
  packed.resize(nb);
  const __m512i offsets = RowOffsets(a);
  for (int64_t tc = 0; tc < a.num_tokens; tc += kTokenChunk) {
    const int64_t te =
        tc + kTokenChunk < a.num_tokens ? tc + kTokenChunk : a.num_tokens;
    tok.resize((te - tc) * nb);
    for (int64_t t = tc; t < te; ++t) {
      PackTokenBlocks(a, t, tok.data() + (t - tc) * nb);
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kLanes) {
      const int num_rows =
          static_cast<int>(row_end - r0 < kLanes ? row_end - r0 : kLanes);
      for (int64_t b = 0; b < nb; ++b) {
        if (kGroups16) {
          PackBlock<true, true>(a, r0, num_rows, offsets, b, &packed[b]);
        } else {
          PackGroupBlock<false>(a, r0, num_rows, offsets, b, &packed[b]);
        }
      }
      const __mmask16 rows = static_cast<__mmask16>((1u << num_rows) - 1);
      int64_t t = tc;
      for (; t + kTokenTile <= te; t += kTokenTile) {
        GroupTokens<kTokenTile>(packed.data(), a, tok.data(), nb, t, tc, r0,
                                rows);
      }
      for (; t < te; ++t) {
        GroupTokens<1>(packed.data(), a, tok.data(), nb, t, tc, r0, rows);
      }
    }
  }
}

}  // namespace

void MatMulRowsQ4_0LanesAvx512(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end) {
  if (a.num_tokens == 1) {
    RowsOneToken<false>(a, row_begin, row_end);
  } else {
    RowsManyTokens<false>(a, row_begin, row_end);
  }
}

void MatMulRowsQ4_0Groups16Avx512(const MatMulArgs& a, int64_t row_begin,
                                  int64_t row_end) {
  if (a.num_tokens == 1) {
    RowsOneToken<true>(a, row_begin, row_end);
  } else {
    RowsManyTokens<true>(a, row_begin, row_end);
  }
}

}  // namespace kvault::kernels

#endif
