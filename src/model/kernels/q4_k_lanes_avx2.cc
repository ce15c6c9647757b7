// AVX2 Q4_K MatMul with 8 weight rows in the 8 int32 lanes of a ymm, from
// WeightLayout::kGroups16 (a 16-row group is two 8-row halves: dword j of
// rows 0-7 and of rows 8-15 are adjacent 32-byte halves) or, for kRows,
// transposed on the fly.
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
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

constexpr int kLanes = 8;                // rows per ymm
constexpr int kGroupRows = 16;           // rows of a kGroups16 group
constexpr int kUnits = 32;               // 4-byte units of a super-block's qs
constexpr int kSbDwords = 4 + kUnits;    // head (d, dmin, scales) + qs
constexpr int kTokenTile = 4;            // tokens sharing a unit's load
constexpr int64_t kXChunkBytes = 256 * 1024;  // activations kept hot in L2
constexpr int64_t kMaxChunkTokens = 256;
constexpr int64_t kGroupSbBytes = kGroupRows * q4_k::kBytes;
constexpr int64_t kPrefetchSbs = 3;  // decode: group super-blocks ahead

static_assert(q4_k::kQs == 16, "dwords 0-3 are d, dmin and the scales");

// A super-block's scales for 8 rows.
struct SbScales {
  __m256i scale[8];    // lane r: row r's sub-block scale, both int16 halves
  __m256i minpair[4];  // lane r: int16 pair [min 2c, min 2c + 1]
  __m256 d;
  __m256 dmin;
};

// One super-block of 8 rows with its nibbles unpacked (prefill).
struct HalfSb {
  __m256i lo[kUnits];
  __m256i hi[kUnits];
  SbScales s;
};

// One token's super-block: its scale and the int16 pairs of 32-value
// block sums per chunk.
struct TokenSb {
  float d;
  int32_t sums[4];  // dword c: [bsum32 2c, bsum32 2c + 1] as int16
};

// The float accumulators of 8 rows for one token.
struct Acc {
  __m256 acc;
  __m256 accm;
};

// vpshufb control putting bytes `lo` and `hi` of each dword into its two
// int16 halves (zero-extended).
inline __m256i BytePairCtrl(int lo, int hi) {
  const auto dw = [&](int i) {
    return static_cast<int32_t>(static_cast<uint32_t>(4 * i + lo) | 0x8000u |
                                static_cast<uint32_t>(4 * i + hi) << 16 |
                                0x80000000u);
  };
  return _mm256_setr_epi32(dw(0), dw(1), dw(2), dw(3), dw(0), dw(1), dw(2),
                           dw(3));
}

// The scales of 8 rows from the super-block's first 4 dwords: head[0]
// lane r = row r's d | dmin, head[1..3] its 12 scale bytes.
inline __attribute__((always_inline)) void UnpackScales(const __m256i head[4],
                                                        SbScales* g) {
  // Per 128-bit lane: d of its 4 rows, then their dmin.
  const __m256i split = _mm256_shuffle_epi8(
      head[0], _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11,
                                14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7,
                                10, 11, 14, 15));
  const __m256i halves = _mm256_permute4x64_epi64(split, 0xD8);
  g->d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
  g->dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
  const __m256i low6 = _mm256_set1_epi32(0x3F3F3F3F);
  const __m256i low4 = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i low2 = _mm256_set1_epi32(0x03030303);
  const __m256i w0 = head[1], w1 = head[2], w2 = head[3];
  const __m256i sc[2] = {
      _mm256_and_si256(w0, low6),
      _mm256_or_si256(
          _mm256_and_si256(w2, low4),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), low2),
                            4))};
  const __m256i mn[2] = {
      _mm256_and_si256(w1, low6),
      _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi32(w2, 4), low4),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), low2),
                            4))};
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    g->scale[j] = _mm256_shuffle_epi8(sc[j / 4], BytePairCtrl(j % 4, j % 4));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const int b = 2 * (c % 2);
    g->minpair[c] = _mm256_shuffle_epi8(mn[c / 2], BytePairCtrl(b, b + 1));
  }
}

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

// Units read from a kGroups16 half and unpacked as used (decode).
struct RawUnits {
  const std::byte* base;  // the half's dword 0; dword j at base + 64 j
  __m256i Raw(int u) const {
    return _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(base + 64 * (4 + u)));
  }
  __m256i Lo(int u) const {
    return _mm256_and_si256(Raw(u), _mm256_set1_epi8(0x0F));
  }
  __m256i Hi(int u) const {
    return _mm256_and_si256(_mm256_srli_epi16(Raw(u), 4),
                            _mm256_set1_epi8(0x0F));
  }
};

// An empty asm on an accumulator: GCC otherwise reassociates the chains of
// vpaddw / vpaddd below into trees whose leaves (every vpmaddubsw of a
// chunk) are spilled to the stack, which measured ~3x slower.
inline __attribute__((always_inline)) void KeepChain(__m256i& v) {
  asm("" : "+x"(v));
}

inline __m256i BroadcastDword(const std::byte* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// lo[t], hi[t] = int16 pair sums of chunk c's low / high sub-block
// against token t's x values `xq[t]`.
template <int T, class Units>
inline __attribute__((always_inline)) void ChunkPairs(
    const Units& w, int c, const std::byte* const* xq, __m256i (&lo)[T],
    __m256i (&hi)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i wl = w.Lo(8 * c + k);
    const __m256i wh = w.Hi(8 * c + k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::byte* x = xq[t] + 64 * c + 4 * k;
      lo[t] = _mm256_add_epi16(lo[t],
                               _mm256_maddubs_epi16(wl, BroadcastDword(x)));
      hi[t] = _mm256_add_epi16(
          hi[t], _mm256_maddubs_epi16(wh, BroadcastDword(x + 32)));
      KeepChain(lo[t]);
      KeepChain(hi[t]);
    }
  }
}

// acc[t] (8 rows) += one super-block for tokens t < T: x values xq[t],
// their scale and sums tok[t], order gemm[t].
template <int T, class Units>
inline __attribute__((always_inline)) void StepSb(
    const Units& w, const SbScales& s, const std::byte* const* xq,
    const TokenSb* const* tok, const bool* gemm, Acc* const* acc) {
  __m256 dd[T], dm[T];
  __m256i sum[T], msum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256 dx = _mm256_set1_ps(tok[t]->d);
    dd[t] = _mm256_mul_ps(s.d, dx);
    dm[t] = _mm256_mul_ps(s.dmin, dx);
    sum[t] = msum[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 1
  for (int c = 0; c < 4; ++c) {
    __m256i lo[T], hi[T];
    ChunkPairs<T>(w, c, xq, lo, hi);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i sc = _mm256_add_epi32(_mm256_madd_epi16(lo[t], s.scale[2 * c]),
                                          _mm256_madd_epi16(hi[t], s.scale[2 * c + 1]));
      const __m256i m = _mm256_madd_epi16(s.minpair[c],
                                          _mm256_set1_epi32(tok[t]->sums[c]));
      if (gemm[t]) {
        acc[t]->acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sc), dd[t], acc[t]->acc);
        acc[t]->accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), dm[t], acc[t]->accm);
      } else {
        sum[t] = _mm256_add_epi32(sum[t], sc);
        msum[t] = _mm256_add_epi32(msum[t], m);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    if (gemm[t]) continue;
    acc[t]->acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), dd[t], acc[t]->acc);
    acc[t]->accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]), dm[t], acc[t]->accm);
  }
}

// Token t's super-blocks of `a`: out[b] for b < cols / 256.
void PackTokenSbs(const MatMulArgs& a, int64_t t, TokenSb* out) {
  const int64_t nb = a.cols / kBlockK;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * q8_k::kBytes;
    std::memcpy(&out[b].d, xb + q8_k::kD, sizeof(float));
    const __m256i b16 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q8_k::kBsums));
    // |bsum16| <= 16 * 128, so the pair sums fit int16.
    const __m128i sums8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                                         _mm256_extracti128_si256(b16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].sums), sums8);
  }
}

inline bool IsGemm(const MatMulArgs& a, int64_t t) {
  return a.orders != nullptr && a.orders[t] == DotOrder::kGemm;
}

// y[t, r0 .. r0 + num_rows) = acc - accm.
inline void StoreRows(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
                      const Acc& acc) {
  const __m256 y = _mm256_sub_ps(acc.acc, acc.accm);
  float* out = a.y + t * a.y_stride + r0;
  if (num_rows == kLanes) {
    _mm256_storeu_ps(out, y);
    return;
  }
  alignas(32) float v[kLanes];
  _mm256_store_ps(v, y);
  std::memcpy(out, v, num_rows * sizeof(float));
}

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
    const std::byte* xq = a.x + t * a.x_row_bytes + b * q8_k::kBytes + q8_k::kQs;
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
  const int rows = static_cast<int>(std::min<int64_t>(kGroupRows, row_end - r0));
  const int halves = (rows + kLanes - 1) / kLanes;
  const std::byte* group = a.w + r0 * a.w_row_bytes;
  std::fill(acc, acc + 2 * (te - tc), Acc{_mm256_setzero_ps(), _mm256_setzero_ps()});
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

// One token over kGroups16 groups, the units streamed from memory.
void Groups16OneToken(const MatMulArgs& a, int64_t r0, int64_t r1) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<TokenSb> tok;
  tok.resize(nb);
  PackTokenSbs(a, 0, tok.data());
  const bool gemm = IsGemm(a, 0);
  for (; r0 < r1; r0 += kGroupRows) {
    const std::byte* group = a.w + r0 * a.w_row_bytes;
    Acc acc[2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()},
                  {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* unit = group + b * kGroupSbBytes;
      // One sequential stream (the next group follows this one).
      const char* ahead =
          reinterpret_cast<const char*>(unit + kPrefetchSbs * kGroupSbBytes);
#pragma GCC unroll 36
      for (int line = 0; line < kGroupSbBytes / 64; ++line) {
        _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
      }
      const std::byte* xq = a.x + b * q8_k::kBytes + q8_k::kQs;
      const TokenSb* ts = &tok[b];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i head[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          head[j] = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(unit + 32 * h + 64 * j));
        }
        SbScales s;
        UnpackScales(head, &s);
        Acc* ac = &acc[h];
        StepSb<1>(RawUnits{unit + 32 * h}, s, &xq, &ts, &gemm, &ac);
      }
    }
    StoreRows(a, 0, r0, kLanes, acc[0]);
    StoreRows(a, 0, r0 + kLanes, kLanes, acc[1]);
  }
}

}  // namespace

void MatMulRowsQ4KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  MatMulRowsTokens<false>(a, row_begin, row_end);
}

void MatMulRowsQ4KGroups16Avx2(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end) {
  if (a.num_tokens == 1) {
    Groups16OneToken(a, row_begin, row_end);
  } else {
    MatMulRowsTokens<true>(a, row_begin, row_end);
  }
}

}  // namespace kvault::kernels

#endif
