// AVX-512 VNNI Q4_K MatMul with 16 weight rows in the 16 int32 lanes of a
// zmm, transposed on the fly from the file's own blocks (no second copy).
//
// Per 16-row group and super-block, 32 "units" of 4 nibble bytes: unit
// 8c + k, lane r = bytes 32c + 4k .. 32c + 4k + 3 of row r's qs, whose low
// nibbles are values 64c + 4k .. + 3 (sub-block 2c) and high nibbles
// values 64c + 32 + 4k .. + 3 (sub-block 2c + 1). A token's four int8 x
// values for the same positions are one broadcast dword, so one vpdpbusd
// advances 16 rows by 4 products:
//   lo, hi = sum_k vpdpbusd(unit 8c + k, broadcast(x))   per 64-value chunk c
//   S_c    = lo * scale[2c] + hi * scale[2c + 1]           exact int32 per row
//   M_c    = min[2c] * bsum32[2c] + min[2c + 1] * bsum32[2c + 1]
// and then llama.cpp's repacked float steps (kquants_avx512.cc,
// Combine::kGgmlSteppedQ4K): kGemm tokens acc = fma(S_c, d * dx, acc),
// accm = fma(M_c, dmin * dx, accm) per chunk; kGemv tokens once per
// super-block with the chunks' integer sums; y = acc - accm. Every lane
// runs the per-row kernel's float sequence, so results are bit-identical
// to it and to the scalar reference.
#include "model/kernels/kernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes16_avx512.h"
#include "model/kernels/quant_blocks.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvault::kernels {
namespace {

constexpr int kLanes = 16;            // rows per group
constexpr int kUnits = 32;            // 4-byte units of a super-block's qs
constexpr int kTokenTile = 4;         // tokens sharing a unit's registers
constexpr int64_t kTokenChunk = 128;  // tokens whose x stays hot in cache
constexpr int64_t kPrefetchSbs = 3;   // decode: super-blocks fetched ahead

// A super-block's scales for 16 rows.
struct SbScales {
  __m512i scale[8];    // lane r: row r's sub-block scale
  __m512i minpair[4];  // lane r: int16 pair [min 2c, min 2c + 1]
  __m512 d;
  __m512 dmin;
};

// One super-block of a 16-row group, ready for the token loop.
struct GroupSb {
  __m512i lo[kUnits];  // lane r: unit u's low nibbles (values 4 per lane)
  __m512i hi[kUnits];  // ... and its high nibbles
  SbScales s;
};

// One token's super-block: its scale and the int16 pairs of 32-value
// block sums per chunk.
struct TokenSb {
  float d;
  int32_t sums[4];  // dword c: [bsum32 2c, bsum32 2c + 1] as int16
};

// Byte `i` of every dword lane, as int32.
inline __m512i ByteOf(__m512i v, int i) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), _mm512_set1_epi32(0xFF));
}

static_assert(q4_k::kQs == 16, "quarter 0 is d, dmin and the scales");

// The scales of 16 rows from the super-block's first 4 dwords: head[0]
// lane r = row r's d | dmin, head[1..3] its 12 scale bytes.
inline __attribute__((always_inline)) void UnpackScales(const __m512i head[4],
                                                        SbScales* g) {
  g->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0]));
  g->dmin =
      _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head[0], 16)));
  const __m512i low6 = _mm512_set1_epi32(0x3F3F3F3F);
  const __m512i low4 = _mm512_set1_epi32(0x0F0F0F0F);
  const __m512i low2 = _mm512_set1_epi32(0x03030303);
  const __m512i w0 = head[1], w1 = head[2], w2 = head[3];
  const __m512i sc[2] = {
      _mm512_and_si512(w0, low6),
      _mm512_or_si512(
          _mm512_and_si512(w2, low4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), low2),
                            4))};
  const __m512i mn[2] = {
      _mm512_and_si512(w1, low6),
      _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(w2, 4), low4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), low2),
                            4))};
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) g->scale[j] = ByteOf(sc[j / 4], j % 4);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i v = mn[c / 2];
    g->minpair[c] =
        _mm512_or_si512(ByteOf(v, 2 * (c % 2)),
                        _mm512_slli_epi32(ByteOf(v, 2 * (c % 2) + 1), 16));
  }
}

// Fills `g` from the super-block's 36 dwords of 16 rows: the head (see
// UnpackScales), then units[u] = qs bytes 4u .. 4u + 3.
inline __attribute__((always_inline)) void UnpackGroupSb(
    const __m512i head[4], const __m512i units[kUnits], GroupSb* g) {
  UnpackScales(head, &g->s);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 32
  for (int u = 0; u < kUnits; ++u) {
    g->lo[u] = _mm512_and_si512(units[u], m4);
    g->hi[u] = _mm512_and_si512(_mm512_srli_epi32(units[u], 4), m4);
  }
}

// WeightLayout::kRows: transposes the super-block at `base` of 16 rows
// (row r at base + r * row_bytes) into `g`.
inline void PackGroupSb(const std::byte* base, size_t row_bytes, GroupSb* g) {
  __m512i dwords[4 + kUnits];
#pragma GCC unroll 9
  for (int q = 0; q < 9; ++q)
    Transpose16x4Dwords(base + 16 * q, row_bytes, kLanes, dwords + 4 * q);
  UnpackGroupSb(dwords, dwords + 4, g);
}

// WeightLayout::kGroups16: the super-block's unit at `unit` holds the
// dwords already transposed.
inline void LoadGroupSb(const std::byte* unit, GroupSb* g) {
  __m512i dwords[4 + kUnits];
#pragma GCC unroll 36
  for (int j = 0; j < 4 + kUnits; ++j) {
    dwords[j] = _mm512_loadu_si512(unit + 64 * j);
  }
  UnpackGroupSb(dwords, dwords + 4, g);
}

void PackTokenSbs(const MatMulArgs& a, int64_t t, TokenSb* out) {
  const int64_t nb = a.cols / kBlockK;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* xb = a.x + t * a.x_row_bytes + b * q8_k::kBytes;
    std::memcpy(&out[b].d, xb + q8_k::kD, sizeof(float));
    const __m256i b16 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + q8_k::kBsums));
    const __m128i sums8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16),
                                         _mm256_extracti128_si256(b16, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].sums), sums8);
  }
}

// Whether token t of `a` is in the kGemm order.
inline bool IsGemm(const MatMulArgs& a, int64_t t) {
  return a.orders != nullptr && a.orders[t] == DotOrder::kGemm;
}

// acc/accm[t] (16 rows) += super-block b for tokens [t0, t0 + T).
template <int T>
inline __attribute__((always_inline)) void StepTokens(
    const GroupSb& g, const MatMulArgs& a, const TokenSb* tok, int64_t t0,
    int64_t b, __m512 (&acc)[T], __m512 (&accm)[T]) {
  bool gemm[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) gemm[t] = IsGemm(a, t0 + t);
  const std::byte* xq[T];
  __m512 dd[T], dm[T];
  __m512i sum[T], msum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = a.x + (t0 + t) * a.x_row_bytes + b * q8_k::kBytes + q8_k::kQs;
    const __m512 dx = _mm512_set1_ps(tok[t].d);
    dd[t] = _mm512_mul_ps(g.s.d, dx);
    dm[t] = _mm512_mul_ps(g.s.dmin, dx);
    sum[t] = msum[t] = _mm512_setzero_si512();
  }
#pragma GCC unroll 1
  for (int c = 0; c < 4; ++c) {
    __m512i lo[T], hi[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const int u = 8 * c + k;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t xl, xh;
        std::memcpy(&xl, xq[t] + 64 * c + 4 * k, sizeof(xl));
        std::memcpy(&xh, xq[t] + 64 * c + 32 + 4 * k, sizeof(xh));
        lo[t] = _mm512_dpbusd_epi32(lo[t], g.lo[u], _mm512_set1_epi32(xl));
        hi[t] = _mm512_dpbusd_epi32(hi[t], g.hi[u], _mm512_set1_epi32(xh));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i s =
          _mm512_add_epi32(_mm512_mullo_epi32(lo[t], g.s.scale[2 * c]),
                           _mm512_mullo_epi32(hi[t], g.s.scale[2 * c + 1]));
      const __m512i m =
          _mm512_dpwssd_epi32(_mm512_setzero_si512(), g.s.minpair[c],
                              _mm512_set1_epi32(tok[t].sums[c]));
      if (gemm[t]) {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd[t], acc[t]);
        accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm[t], accm[t]);
      } else {
        sum[t] = _mm512_add_epi32(sum[t], s);
        msum[t] = _mm512_add_epi32(msum[t], m);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    if (gemm[t]) continue;
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), dd[t], acc[t]);
    accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]), dm[t], accm[t]);
  }
}

template <int T>
void GroupTokens(const GroupSb* packed, const MatMulArgs& a, const TokenSb* tok,
                 int64_t nb, int64_t t0, int64_t chunk_begin, int64_t r0) {
  __m512 acc[T], accm[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  const TokenSb* tt = tok + (t0 - chunk_begin) * nb;
  TokenSb tb[T];
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) tb[t] = tt[t * nb + b];
    StepTokens<T>(packed[b], a, tb, t0, b, acc, accm);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(a.y + (t0 + t) * a.y_stride + r0,
                     _mm512_sub_ps(acc[t], accm[t]));
  }
}

// Packs super-block b of the 16-row group at r0.
template <bool kGroups16>
inline void PackSb(const MatMulArgs& a, int64_t r0, int64_t b, GroupSb* g) {
  const std::byte* group = a.w + r0 * a.w_row_bytes;
  if constexpr (kGroups16) {
    LoadGroupSb(group + b * kLanes * q4_k::kBytes, g);
  } else {
    PackGroupSb(group + b * q4_k::kBytes, a.w_row_bytes, g);
  }
}

// One token over kGroups16 groups, the units read straight from memory
// (no GroupSb round trip): StepTokens<1>'s operations in its order.
void Groups16OneToken(const MatMulArgs& a, bool gemm, int64_t r0, int64_t r1) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<TokenSb> tok;
  tok.resize(nb);
  PackTokenSbs(a, 0, tok.data());
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  constexpr int64_t kUnitBytes = kLanes * q4_k::kBytes;
  for (; r0 < r1; r0 += kLanes) {
    const std::byte* group = a.w + r0 * a.w_row_bytes;
    __m512 acc = _mm512_setzero_ps();
    __m512 accm = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* unit = group + b * kUnitBytes;
      // One sequential stream (the next group follows this one).
      const char* ahead =
          reinterpret_cast<const char*>(unit + kPrefetchSbs * kUnitBytes);
#pragma GCC unroll 36
      for (int line = 0; line < kUnitBytes / 64; ++line) {
        _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
      }
      __m512i head[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) head[j] = _mm512_loadu_si512(unit + 64 * j);
      SbScales sc;
      UnpackScales(head, &sc);
      const TokenSb& tb = tok[b];
      const __m512 dx = _mm512_set1_ps(tb.d);
      const __m512 dd = _mm512_mul_ps(sc.d, dx);
      const __m512 dm = _mm512_mul_ps(sc.dmin, dx);
      const std::byte* xq = a.x + b * q8_k::kBytes + q8_k::kQs;
      __m512i sum = _mm512_setzero_si512(), msum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m512i u = _mm512_loadu_si512(unit + 256 + 64 * (8 * c + k));
          int32_t xl, xh;
          std::memcpy(&xl, xq + 64 * c + 4 * k, sizeof(xl));
          std::memcpy(&xh, xq + 64 * c + 32 + 4 * k, sizeof(xh));
          lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(u, m4),
                                   _mm512_set1_epi32(xl));
          hi = _mm512_dpbusd_epi32(
              hi, _mm512_and_si512(_mm512_srli_epi32(u, 4), m4),
              _mm512_set1_epi32(xh));
        }
        const __m512i s =
            _mm512_add_epi32(_mm512_mullo_epi32(lo, sc.scale[2 * c]),
                             _mm512_mullo_epi32(hi, sc.scale[2 * c + 1]));
        const __m512i m =
            _mm512_dpwssd_epi32(_mm512_setzero_si512(), sc.minpair[c],
                                _mm512_set1_epi32(tb.sums[c]));
        if (gemm) {
          acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc);
          accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, accm);
        } else {
          sum = _mm512_add_epi32(sum, s);
          msum = _mm512_add_epi32(msum, m);
        }
      }
      if (!gemm) {
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), dd, acc);
        accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), dm, accm);
      }
    }
    _mm512_storeu_ps(a.y + r0, _mm512_sub_ps(acc, accm));
  }
}

// Rows [row_begin, row_end) of 16-row groups (row_begin a multiple of 16);
// a last partial group goes through the per-row kernel (kRows only).
template <bool kGroups16>
void MatMulRowsLanes(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<TokenSb> tok;
  thread_local std::vector<GroupSb> packed;
  const int64_t lanes_end = row_begin + (row_end - row_begin) / kLanes * kLanes;
  // One token over kGroups16: straight from memory. (kRows is only called
  // with batches: MatMulRowsQ4KAvx512 sends one token to the per-row kernel.)
  const bool one_token = a.num_tokens == 1 && kGroups16;
  if (one_token) Groups16OneToken(a, IsGemm(a, 0), row_begin, lanes_end);
  packed.resize(nb);
  for (int64_t tc = 0; !one_token && tc < a.num_tokens; tc += kTokenChunk) {
    const int64_t te =
        tc + kTokenChunk < a.num_tokens ? tc + kTokenChunk : a.num_tokens;
    tok.resize((te - tc) * nb);
    for (int64_t t = tc; t < te; ++t) {
      PackTokenSbs(a, t, tok.data() + (t - tc) * nb);
    }
    for (int64_t r0 = row_begin; r0 < lanes_end; r0 += kLanes) {
      for (int64_t b = 0; b < nb; ++b) PackSb<kGroups16>(a, r0, b, &packed[b]);
      int64_t t = tc;
      for (; t + kTokenTile <= te; t += kTokenTile) {
        GroupTokens<kTokenTile>(packed.data(), a, tok.data(), nb, t, tc, r0);
      }
      for (; t < te; ++t) {
        GroupTokens<1>(packed.data(), a, tok.data(), nb, t, tc, r0);
      }
    }
  }
  if (lanes_end < row_end) MatMulRowsQ4KPerRowAvx512(a, lanes_end, row_end);
}

}  // namespace

void MatMulRowsQ4KLanesAvx512(const MatMulArgs& a, int64_t row_begin,
                              int64_t row_end) {
  MatMulRowsLanes<false>(a, row_begin, row_end);
}

void MatMulRowsQ4KGroups16Avx512(const MatMulArgs& a, int64_t row_begin,
                                 int64_t row_end) {
  MatMulRowsLanes<true>(a, row_begin, row_end);
}

void MatMulRowsQ4KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end) {
  // Transposing a group's blocks pays off once two tokens share it.
  if (a.num_tokens >= 2) {
    MatMulRowsQ4KLanesAvx512(a, row_begin, row_end);
  } else {
    MatMulRowsQ4KPerRowAvx512(a, row_begin, row_end);
  }
}

}  // namespace kvault::kernels

#endif
