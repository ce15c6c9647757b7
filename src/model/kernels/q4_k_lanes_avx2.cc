// AVX2 Q4_K MatMul with 8 weight rows in the 8 int32 lanes of a ymm, from
// WeightLayout::kGroups16 (a 16-row group is two 8-row halves: dword j of
// rows 0-7 and of rows 8-15 are adjacent 32-byte halves) or, for kRows,
// transposed on the fly. This file: batches of tokens (each 8-row
// super-block unpacked once into an L1 buffer for a chunk of tokens, in
// tiles of 4) and kRows; one token over kGroups16: q4_k_decode_avx2.cc;
// the core both share: q4_k_lanes_avx2.h.
//
// Per 8 rows and super-block, 32 units of 4 nibble bytes: unit 8c + k,
// lane r = qs bytes 32c + 4k .. + 3 of row r, whose low nibbles are values
// 64c + 4k .. + 3 (sub-block 2c) and high nibbles values 64c + 32 + 4k ..
// (sub-block 2c + 1). A token's four x values at those positions are one
// broadcast dword, so one vpmaddubsw gives each row two int16 pair sums.
// AVX2 has no vpdpbusd; instead the 8 vpmaddubsw of a sub-block are added
// as int16 (each pair is within 15 * 128 * 2 = 3840 in magnitude, eight of
// them within 30720 < 32768: no wrap), and one vpmaddwd against the row's
// scale (0..63, in both int16 halves of its lane) gives the exact int32
// scale * (q . x) of the sub-block:
//   S_c = madd(lo_c, scale[2c]) + madd(hi_c, scale[2c + 1])
//   M_c = madd([min 2c, min 2c + 1], [bsum32 2c, bsum32 2c + 1])
// Then llama.cpp's repacked float steps, as in the scalar DotQ4KQ8K: kGemm
// tokens acc = fma(S_c, d * dx, acc), accm = fma(M_c, dmin * dx, accm) per
// chunk c; kGemv tokens once per super-block with the chunks' integer sums;
// y = acc - accm. Every lane runs the scalar float sequence of its row, so
// results are bit-identical to it.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/q4_k_lanes_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace q4k_avx2 {
namespace {

constexpr int kSbDwords = 4 + kUnits;         // head (d, dmin, scales) + qs
constexpr int kTokenTile = 4;                 // tokens sharing a unit's load
constexpr int64_t kXChunkBytes = 256 * 1024;  // activations kept hot in L2
constexpr int64_t kMaxChunkTokens = 256;

// One super-block of 8 rows with its nibbles unpacked (prefill).
struct HalfSb {
  __m256i lo[kUnits];
  __m256i hi[kUnits];
  SbScales s;
};

// The dwords of one 8-row super-block: from kGroups16 (dword j at
// base + 64 j) ...
inline void LoadHalfDwords(const std::byte* base, __m256i dw[kSbDwords]) {
#pragma GCC unroll 36
  for (int j = 0; j < kSbDwords; ++j) {
    dw[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 64 * j));
  }
}

// ... or from kRows: rows [0, num_rows) at p + r * row_bytes.
inline void TransposeRowsSb(const std::byte* p, size_t row_bytes, int num_rows,
                            __m256i dw[kSbDwords]) {
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    Transpose8x8Dwords(p + 32 * q, row_bytes, num_rows, dw + 8 * q);
  }
  Transpose8x4Dwords(p + 128, row_bytes, num_rows, dw + 32);
}

inline void UnpackHalfSb(const __m256i dw[kSbDwords], HalfSb* g) {
  UnpackScales(dw, &g->s);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 32
  for (int u = 0; u < kUnits; ++u) {
    g->lo[u] = _mm256_and_si256(dw[4 + u], m4);
    g->hi[u] = _mm256_and_si256(_mm256_srli_epi16(dw[4 + u], 4), m4);
  }
}

// Units already unpacked (prefill).
struct UnpackedUnits {
  const HalfSb* w;
  __m256i Lo(int u) const { return w->lo[u]; }
  __m256i Hi(int u) const { return w->hi[u]; }
};

// Tokens [tc, te) against super-block b of the (up to) two 8-row halves
// `w` of one 16-row group; acc[2 (t - tc) + h].
void StepTokens(const MatMulArgs& a, const HalfSb* w, int halves,
                const TokenSb* tok, int64_t nb, int64_t tc, int64_t te,
                int64_t b, Acc* acc) {
  int64_t t = tc;
  for (; t + kTokenTile <= te; t += kTokenTile) {
    const std::byte* xq[kTokenTile];
    const TokenSb* ts[kTokenTile];
    bool gemm[kTokenTile];
    for (int i = 0; i < kTokenTile; ++i) {
      xq[i] = a.x + (t + i) * a.x_row_bytes + b * q8_k::kBytes + q8_k::kQs;
      ts[i] = tok + (t + i - tc) * nb + b;
      gemm[i] = IsGemm(a, t + i);
    }
    for (int h = 0; h < halves; ++h) {
      Acc* ac[kTokenTile];
      for (int i = 0; i < kTokenTile; ++i) ac[i] = acc + 2 * (t + i - tc) + h;
      StepSb<kTokenTile>(UnpackedUnits{w + h}, w[h].s, xq, ts, gemm, ac);
    }
  }
  for (; t < te; ++t) {
    const std::byte* xq =
        a.x + t * a.x_row_bytes + b * q8_k::kBytes + q8_k::kQs;
    const TokenSb* ts = tok + (t - tc) * nb + b;
    const bool gemm = IsGemm(a, t);
    for (int h = 0; h < halves; ++h) {
      Acc* ac = acc + 2 * (t - tc) + h;
      StepSb<1>(UnpackedUnits{w + h}, w[h].s, &xq, &ts, &gemm, &ac);
    }
  }
}

// Rows [r0, r0 + 16) ∩ [r0, row_end) for tokens [tc, te), each super-block
// unpacked once for all of them.
template <bool kGroups16>
void GroupTokens(const MatMulArgs& a, int64_t r0, int64_t row_end,
                 const TokenSb* tok, int64_t tc, int64_t te, Acc* acc,
                 HalfSb* w) {
  const int64_t nb = a.cols / kBlockK;
  const int rows =
      static_cast<int>(std::min<int64_t>(kGroupRows, row_end - r0));
  const int halves = (rows + kLanes - 1) / kLanes;
  const std::byte* group = a.w + r0 * a.w_row_bytes;
  std::fill(acc, acc + 2 * (te - tc),
            Acc{_mm256_setzero_ps(), _mm256_setzero_ps()});
  for (int64_t b = 0; b < nb; ++b) {
    for (int h = 0; h < halves; ++h) {
      __m256i dw[kSbDwords];
      if constexpr (kGroups16) {
        LoadHalfDwords(group + b * kGroupSbBytes + 32 * h, dw);
      } else {
        TransposeRowsSb(group + kLanes * h * a.w_row_bytes + b * q4_k::kBytes,
                        a.w_row_bytes, std::min(kLanes, rows - kLanes * h), dw);
      }
      UnpackHalfSb(dw, w + h);
    }
    StepTokens(a, w, halves, tok, nb, tc, te, b, acc);
  }
  for (int64_t t = tc; t < te; ++t) {
    for (int h = 0; h < halves; ++h) {
      StoreRows(a, t, r0 + kLanes * h, std::min(kLanes, rows - kLanes * h),
                acc[2 * (t - tc) + h]);
    }
  }
}

// Rows [row_begin, row_end) (row_begin a multiple of 16 apart from
// kRows' last group) in chunks of tokens whose activations stay in L2.
template <bool kGroups16>
void MatMulRowsTokens(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  int64_t chunk = kXChunkBytes / static_cast<int64_t>(a.x_row_bytes);
  chunk = std::clamp<int64_t>(chunk / kTokenTile * kTokenTile, kTokenTile,
                              kMaxChunkTokens);
  thread_local std::vector<TokenSb> tok;
  thread_local std::vector<Acc> acc;
  thread_local std::vector<HalfSb> w(2);
  acc.resize(2 * chunk);
  for (int64_t tc = 0; tc < a.num_tokens; tc += chunk) {
    const int64_t te = std::min(tc + chunk, a.num_tokens);
    tok.resize((te - tc) * nb);
    for (int64_t t = tc; t < te; ++t) {
      PackTokenSbs(a, t, tok.data() + (t - tc) * nb);
    }
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
      GroupTokens<kGroups16>(a, r0, row_end, tok.data(), tc, te, acc.data(),
                             w.data());
    }
  }
}

}  // namespace
}  // namespace q4k_avx2

void MatMulRowsQ4KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  q4k_avx2::MatMulRowsTokens<false>(a, row_begin, row_end);
}

void MatMulRowsQ4KGroups16Avx2(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end) {
  if (a.num_tokens == 1) {
    MatMulRowsQ4KGroups16DecodeAvx2(a, row_begin, row_end);
  } else {
    q4k_avx2::MatMulRowsTokens<true>(a, row_begin, row_end);
  }
}

}  // namespace kvault::kernels

#endif
