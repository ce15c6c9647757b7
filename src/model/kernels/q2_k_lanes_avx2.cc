// AVX2 Q2_K MatMul with 8 weight rows in the lanes, on k_lanes8_avx2.h's
// driver (prefill unpacks each 8-row super-block once per chunk of
// tokens; decode runs a row at a time). The scalar reference is DotQ2KQ8K
// (llama.cpp's repacked orders): per step of 128 values (kGemm) or 256
// (kGemv), the exact integer sums of scale * (q . x) and of min * bsum,
// then acc = fma(isum, d * dx, acc), accm = fma(imin, dmin * dx, accm);
// y = acc - accm.
//
// Prefill: unit u (0..63), lane r = row r's values 4u .. 4u + 3 (bits 2j
// of qs dword 8n + k, u = 32n + 8j + k), all in group u / 4. A group's 4
// vpmaddubsw against broadcast x dwords are added as int16 (|3 * 128 * 2 *
// 4| < 32768) before one vpmaddwd against its scale gives the group's
// exact int32 scale * (q . x) per row.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "model/kernels/k_lanes8_avx2.h"
#include "model/kernels/kquant_kernels.h"
#include "model/kernels/lanes8_avx2.h"
#include "model/kernels/q4_k_lanes_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_avx2.inc"

using klanes8::kUnits;
using klanes8::Load256;
using q4k_avx2::BytePairCtrl;

// The 2-bit values j (bits 2j, 2j + 1) of each byte of `qs`.
inline __attribute__((always_inline)) __m256i Twos(__m256i qs, int j) {
  return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(3));
}

struct Q2K {
  static constexpr int kBytes = q2_k::kBytes;
  using Acc = q4k_avx2::Acc;  // acc, accm; y = acc - accm

  // One super-block of 8 rows, unpacked.
  struct Sb {
    __m256i q[kUnits];   // unit u, lane r: values 4u .. 4u + 3
    __m256i scale[16];   // lane r: group g's scale, both int16 halves
    __m256i minpair[8];  // lane r: int16 pair [min 2i, min 2i + 1]
    __m256 d;
    __m256 dmin;
  };

  // Rows [0, num_rows) of the super-block at p (row r at p + r *
  // row_bytes) into g.
  static void Pack(const std::byte* p, size_t row_bytes, int num_rows, Sb* g) {
    __m256i head[4];  // scale | min << 4 bytes of groups 4i .. 4i + 3
    Transpose8x4Dwords(p + q2_k::kScales, row_bytes, num_rows, head);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 16
    for (int gr = 0; gr < 16; ++gr) {
      g->scale[gr] = _mm256_shuffle_epi8(_mm256_and_si256(head[gr / 4], low4),
                                         BytePairCtrl(gr % 4, gr % 4));
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int b = 2 * (i % 2);
      g->minpair[i] = _mm256_shuffle_epi8(
          _mm256_and_si256(_mm256_srli_epi32(head[i / 2], 4), low4),
          BytePairCtrl(b, b + 1));
    }
    SplitHalves(GatherDwords(p + q2_k::kD, row_bytes, num_rows), &g->d,
                &g->dmin);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i qs[8];
      Transpose8x8Dwords(p + q2_k::kQs + 32 * n, row_bytes, num_rows, qs);
#pragma GCC unroll 32
      for (int i = 0; i < 32; ++i) g->q[32 * n + i] = Twos(qs[i % 8], i / 8);
    }
  }

  static Acc Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }

  // acc[t] (8 rows) += super-block `w` for tokens t < T (Q8_K blocks
  // xb[t], orders gemm[t]).
  template <int T>
  static void Step(const Sb& w, const std::byte* const* xb, const bool* gemm,
                   Acc* const* acc);

  static void Store(const MatMulArgs& a, int64_t t, int64_t r0, int num_rows,
                    const Acc& acc) {
    q4k_avx2::StoreRows(a, t, r0, num_rows, acc);
  }

  // One token, a row at a time.
  static void DecodeRows(const MatMulArgs& a, int64_t r0, int64_t r1);
};

// isum[t] = half n's sum of scale * (q . x) per row, imin[t] its min *
// bsum, for tokens t < T.
template <int T>
inline __attribute__((always_inline)) void HalfSums(const Q2K::Sb& w, int n,
                                                    const std::byte* const* xb,
                                                    __m256i (&isum)[T],
                                                    __m256i (&imin)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) isum[t] = imin[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int gr = 8 * n; gr < 8 * n + 8; ++gr) {
    __m256i p16[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p16[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int u = 4 * gr; u < 4 * gr + 4; ++u) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i x = BroadcastDword(xb[t] + q8_k::kQs + 4 * u);
        p16[t] = _mm256_add_epi16(p16[t], _mm256_maddubs_epi16(w.q[u], x));
        KeepChain(p16[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      isum[t] =
          _mm256_add_epi32(isum[t], _mm256_madd_epi16(p16[t], w.scale[gr]));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int i = 4 * n; i < 4 * n + 4; ++i) {
      const __m256i bs = BroadcastDword(xb[t] + q8_k::kBsums + 4 * i);
      imin[t] = _mm256_add_epi32(imin[t], _mm256_madd_epi16(w.minpair[i], bs));
    }
  }
}

template <int T>
void Q2K::Step(const Sb& w, const std::byte* const* xb, const bool* gemm,
               Acc* const* acc) {
  __m256 dd[T], dm[T];
  __m256i sum[T], msum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256 dx = _mm256_set1_ps(klanes8::FloatAt(xb[t] + q8_k::kD));
    dd[t] = _mm256_mul_ps(w.d, dx);
    dm[t] = _mm256_mul_ps(w.dmin, dx);
    sum[t] = msum[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 1
  for (int n = 0; n < 2; ++n) {
    __m256i isum[T], imin[T];
    HalfSums<T>(w, n, xb, isum, imin);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      if (gemm[t]) {  // a step per 128 values
        acc[t]->acc =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), dd[t], acc[t]->acc);
        acc[t]->accm =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[t]), dm[t], acc[t]->accm);
      } else {
        sum[t] = _mm256_add_epi32(sum[t], isum[t]);
        msum[t] = _mm256_add_epi32(msum[t], imin[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    if (gemm[t]) continue;  // one step per 256 values
    acc[t]->acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), dd[t], acc[t]->acc);
    acc[t]->accm =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]), dm[t], acc[t]->accm);
  }
}

// The sum of the 4 int32 lanes of v.
inline int32_t HSumI32x4(__m128i v) {
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  return _mm_cvtsi128_si32(v) + _mm_extract_epi32(v, 1);
}

// A block of one row against one token: lanes[n] = half n's int32 lanes
// of scale * (q . x), mins int32 i = groups 2i, 2i + 1's min * bsum (half
// n in 128-bit lane n).
inline __attribute__((always_inline)) void BlockSums(const std::byte* blk,
                                                     const std::byte* xb,
                                                     __m256i lanes[2],
                                                     __m256i* mins) {
  const __m128i sm =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + q2_k::kScales));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, low4));
  // Scales 0-7 (registers 0-3), 8-15 (registers 4-7) in both lanes.
  const __m256i sc8[2] = {_mm256_permute4x64_epi64(sc16, 0x44),
                          _mm256_permute4x64_epi64(sc16, 0xEE)};
  *mins = _mm256_madd_epi16(
      _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low4)),
      Load256(xb + q8_k::kBsums));
#pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    const __m256i qs = Load256(blk + q2_k::kQs + 32 * n);
    lanes[n] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * n + j;
      klanes8::AddReg<false>(Twos(qs, j), Load256(xb + q8_k::kQs + 32 * c),
                             klanes8::RegScales(sc8[n], c), lanes[n]);
    }
  }
}

// One row against one token in the order `gemm` selects.
float DecodeRow(const std::byte* w, const std::byte* x, int64_t nb, bool gemm) {
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * Q2K::kBytes;
    const std::byte* xb = x + b * q8_k::kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4 * Q2K::kBytes,
                 _MM_HINT_T0);
    __m256i lanes[2], mins;
    BlockSums(blk, xb, lanes, &mins);
    const float dx = klanes8::FloatAt(xb + q8_k::kD);
    const float dd = HalfAt(blk + q2_k::kD) * dx;
    const float dm = HalfAt(blk + q2_k::kDmin) * dx;
    const __m128i min_half[2] = {_mm256_castsi256_si128(mins),
                                 _mm256_extracti128_si256(mins, 1)};
    if (gemm) {  // a step per 128 values
      for (int n = 0; n < 2; ++n) {
        acc = std::fma(static_cast<float>(HSumI32(lanes[n])), dd, acc);
        accm = std::fma(static_cast<float>(HSumI32x4(min_half[n])), dm, accm);
      }
    } else {
      const int32_t isum = HSumI32(_mm256_add_epi32(lanes[0], lanes[1]));
      const int32_t imin = HSumI32x4(_mm_add_epi32(min_half[0], min_half[1]));
      acc = std::fma(static_cast<float>(isum), dd, acc);
      accm = std::fma(static_cast<float>(imin), dm, accm);
    }
  }
  return acc - accm;
}

void Q2K::DecodeRows(const MatMulArgs& a, int64_t r0, int64_t r1) {
  const bool gemm = IsGemm(a, 0);
  for (int64_t r = r0; r < r1; ++r) {
    a.y[r] = DecodeRow(a.w + r * a.w_row_bytes, a.x, a.cols / kBlockK, gemm);
  }
}

}  // namespace

void MatMulRowsQ2KAvx2(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  klanes8::MatMulRows<Q2K>(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
