// AVX-512 (F/BW/VL/DQ/VNNI) MatMul kernels. Compiled with -mavx512* and
// called only after CPU detection, so this file is self-contained:
// intrinsics and internal-linkage helpers only (see kernel_table.h). The
// vector kernels (norm, softmax, attention dot/axpy) are not hot enough to
// need 512-bit versions; kernels.cc takes them from the AVX2 table.
#include "model/kernels/kernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/ggml_dot_entries.h"
#include "model/kernels/kquant_kernels.h"

// GCC 12's avx512fintrin.h builds "undefined" vectors from self-initialised
// locals (__Y = __Y), which -Wuninitialized flags in every caller.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace kvault::kernels {
namespace {

constexpr int64_t kQ8Bytes = 34;  // Q8_0 block: f16 d + 32 int8
constexpr int64_t kBlock = 32;

inline float HalfAt(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Fixed-order horizontal sums (every path reduces the same way).
inline float HSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HSum512(__m512 v) {
  return HSum256(
      _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

// The AVX-512 lanes of float_matmul.inc.
struct Avx512Lanes {
  using F = __m512;
  static constexpr int64_t kLanes = 16;
  static constexpr int kTokenTile = 4;
  static F Zero() { return _mm512_setzero_ps(); }
  static F LoadF32(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadF16(const std::byte* p) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F LoadBf16(const std::byte* p) {
    const __m512i u = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
  static F Fma(F a, F b, F acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float Sum(F v) { return HSum512(v); }
};

#include "model/kernels/float_matmul.inc"

// Two consecutive blocks' 32 int8 weights side by side in one zmm (block b
// in the low half, b + 1 in the high half); a null second block is zeros.
inline __m512i Join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

struct Q8Block {
  static constexpr int64_t kBytes = kQ8Bytes;
  static __m256i One(const std::byte* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
  static __m512i Pair(const std::byte* b0, const std::byte* b1) {
    return Join(One(b0), b1 == nullptr ? _mm256_setzero_si256() : One(b1));
  }
  // The pair offset to unsigned (w + kOffset) for the decode path.
  static constexpr int kOffset = 128;
  static __m512i PairUnsigned(const std::byte* b0, const std::byte* b1) {
    return _mm512_xor_si512(Pair(b0, b1),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// acc (8 lanes in its low half, the high half zero) += the block pair's
// products, the even block then the odd one: one 8-lane fma per block in
// block order, as ggml's Q8_0 vec_dot and tinyBLAS sum, so with their
// horizontal sum the result is theirs bit for bit. A missing odd block
// has product and scale 0, which leaves acc unchanged.
inline __m512 PairFma(__m512 prod, __m512 scale, __m512 acc) {
  __m256 a = _mm512_castps512_ps256(acc);
  a = _mm256_fmadd_ps(_mm512_castps512_ps256(prod),
                      _mm512_castps512_ps256(scale), a);
  a = _mm256_fmadd_ps(_mm512_extractf32x8_ps(prod, 1),
                      _mm512_extractf32x8_ps(scale, 1), a);
  return _mm512_zextps256_ps512(a);
}

// Both scales of a block pair: [d0 x 8 | d1 x 8] (d1 = 0 when absent).
inline __m512 PairScales(const std::byte* b0, const std::byte* b1) {
  const __m256 lo = _mm256_set1_ps(HalfAt(b0));
  const __m256 hi = _mm256_set1_ps(b1 == nullptr ? 0.0f : HalfAt(b1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

// Quantized weights . Q8_0 activations with VNNI, two blocks per zmm.
// vpdpbusd multiplies unsigned by signed bytes, so x is offset to x + 128
// (an XOR of the sign bit) and the accumulator starts at -128 * sum(w) per
// lane, making each int32 lane the exact sum of 4 adjacent products. Then
// per block pair and element: acc = fma(float(lanes), dw * dx, acc). An odd
// last block is paired with zeros, in every tile shape alike.
template <class Block>
struct QuantKernel {
  static constexpr int kRowTile = 4;
  static constexpr int kTokenTile = 4;

  // One row's block pair ready for the tile loop: quants, the -128 * sum(w)
  // correction and the scales ([d0 x 8 | d1 x 8]), computed once per row
  // tile (PrepareRows) instead of once per token tile.
  struct PackedPair {
    __m512i wq;
    __m512i corr;
    __m512 dw;
  };

  // One token's block pair ready for the tile loop: quants offset to
  // unsigned (x + 128) and the scales.
  struct PackedX {
    __m512i xu;
    __m512 dx;
  };

  // [tokens, num_pairs] for the thread's current token chunk, which starts
  // at token XBegin().
  static std::vector<PackedX>& PackedTokens() {
    thread_local std::vector<PackedX> packed;
    return packed;
  }
  static int64_t& XBegin() {
    thread_local int64_t begin = 0;
    return begin;
  }

  // Packs the activations of tokens [t_begin, t_end) for TileMulti; called
  // by MatMulRowsTiled once per token chunk.
  static void PrepareTokens(const MatMulArgs& a, int64_t t_begin,
                            int64_t t_end) {
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
    const int64_t num_blocks = a.cols / kBlock;
    const int64_t num_pairs = (num_blocks + 1) / 2;
    std::vector<PackedX>& packed = PackedTokens();
    packed.resize((t_end - t_begin) * num_pairs);
    XBegin() = t_begin;
    for (int64_t t = t_begin; t < t_end; ++t) {
      for (int64_t p = 0; p < num_pairs; ++p) {
        const std::byte* b0 = a.x + t * a.x_row_bytes + 2 * p * kQ8Bytes;
        const std::byte* b1 = 2 * p + 1 < num_blocks ? b0 + kQ8Bytes : nullptr;
        PackedX& px = packed[(t - t_begin) * num_pairs + p];
        px.xu = _mm512_xor_si512(Q8Block::Pair(b0, b1), k80);
        px.dx = PairScales(b0, b1);
      }
    }
  }

  // [num_pairs, R] for the rows the thread's current TokenLoop covers.
  static std::vector<PackedPair>& Packed() {
    thread_local std::vector<PackedPair> packed;
    return packed;
  }

  // Packs rows [r0, r0 + R) for TileMulti; called by TokenLoop before the
  // multi-token tiles of those rows.
  template <int R>
  static void PrepareRows(const MatMulArgs& a, int64_t r0) {
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
    const int64_t num_blocks = a.cols / kBlock;
    const int64_t num_pairs = (num_blocks + 1) / 2;
    std::vector<PackedPair>& packed = Packed();
    packed.resize(num_pairs * R);
    for (int64_t p = 0; p < num_pairs; ++p) {
      for (int r = 0; r < R; ++r) {
        const std::byte* b0 =
            a.w + (r0 + r) * a.w_row_bytes + 2 * p * Block::kBytes;
        const std::byte* b1 =
            2 * p + 1 < num_blocks ? b0 + Block::kBytes : nullptr;
        // The next row tile's pair, into L2 (see the AVX2 Q8_0 kernel).
        _mm_prefetch(reinterpret_cast<const char*>(b0 + R * a.w_row_bytes),
                     _MM_HINT_T1);
        PackedPair& pp = packed[p * R + r];
        pp.wq = Block::Pair(b0, b1);
        pp.corr = _mm512_sub_epi32(
            _mm512_setzero_si512(),
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, pp.wq));
        pp.dw = PairScales(b0, b1);
      }
    }
  }

  // Adds block pair p (blocks 2p and 2p + 1, or only 2p when !kPair) of
  // the packed rows to every accumulator of the tile.
  template <int R, int T>
  static void StepPacked(const PackedPair* rows, const PackedX* const* x,
                         int64_t p, __m512 (&acc)[R][T]) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i xu = x[t][p].xu;
      const __m512 dx = x[t][p].dx;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const PackedPair& pp = rows[p * R + r];
        const __m512 prod =
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(pp.corr, xu, pp.wq));
        acc[r][t] = PairFma(prod, _mm512_mul_ps(pp.dw, dx), acc[r][t]);
      }
    }
  }

  // One token's block pair for DecodeRows: signed x, the correction
  // -kOffset * (sum of each lane's 4 x) and the scales.
  struct DecodeX {
    __m512i xs;
    __m512i corr;
    __m512 dx;
  };

  // One token (decode): rows one at a time in address order. The weights
  // stay offset to unsigned (w + kOffset) against
  // signed x, and the per-token correction -kOffset * sum(x) restores the
  // exact int32 lanes of the paired path; the float steps are the paired
  // path's too, so a token's result is bit-identical to its value in a
  // batch.
  static void DecodeRows(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end) {
    const int64_t num_blocks = a.cols / kBlock;
    const int64_t num_pairs = (num_blocks + 1) / 2;
    thread_local std::vector<DecodeX> xs;
    xs.resize(num_pairs);
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t p = 0; p < num_pairs; ++p) {
      const std::byte* b0 = a.x + 2 * p * kQ8Bytes;
      const std::byte* b1 = 2 * p + 1 < num_blocks ? b0 + kQ8Bytes : nullptr;
      DecodeX& d = xs[p];
      d.xs = Q8Block::Pair(b0, b1);
      const __m512i sums =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, d.xs);
      d.corr = _mm512_mullo_epi32(sums, _mm512_set1_epi32(-Block::kOffset));
      d.dx = PairScales(b0, b1);
    }
    for (int64_t r = row_begin; r < row_end; ++r) {
      const std::byte* row = a.w + r * a.w_row_bytes;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t p = 0; p < num_pairs; ++p) {
        const std::byte* b0 = row + 2 * p * Block::kBytes;
        const std::byte* b1 =
            2 * p + 1 < num_blocks ? b0 + Block::kBytes : nullptr;
        // The next row's same pair (rows are often about one 4 KiB page,
        // where the hardware prefetchers stop).
        const char* next = reinterpret_cast<const char*>(b0 + a.w_row_bytes);
        _mm_prefetch(next, _MM_HINT_T0);
        if constexpr (2 * Block::kBytes > 64) {
          _mm_prefetch(next + 64, _MM_HINT_T0);
        }
        const __m512i wq = Block::PairUnsigned(b0, b1);
        const __m512 dw = PairScales(b0, b1);
        const __m512i isum = _mm512_dpbusd_epi32(xs[p].corr, wq, xs[p].xs);
        acc =
            PairFma(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, xs[p].dx), acc);
      }
      a.y[r] = HSum512(acc);
    }
  }

  template <int R, int T>
  static void TileMulti(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const int64_t num_blocks = a.cols / kBlock;
    const int64_t num_pairs = (num_blocks + 1) / 2;
    const PackedX* x[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      x[t] = PackedTokens().data() + (t0 + t - XBegin()) * num_pairs;
    }
    __m512 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const PackedPair* rows = Packed().data();
    for (int64_t p = 0; p < num_pairs; ++p) StepPacked<R, T>(rows, x, p, acc);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        a.y[(t0 + t) * a.y_stride + r0 + r] = HSum512(acc[r][t]);
      }
    }
  }

  // Tiles of a batch; one token (T == 1, a batch's leftover tokens) takes
  // the same per-pair steps.
  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    if constexpr (T == 1) {
      MatMulArgs one = a;
      one.x = a.x + t0 * a.x_row_bytes;
      one.num_tokens = 1;
      one.y = a.y + t0 * a.y_stride;
      DecodeRows(one, r0, r0 + R);
    } else {
      TileMulti<R, T>(a, r0, t0);
    }
  }
};

#include "model/kernels/matmul_tiling.inc"

constexpr KernelTable kAvx512Table = {
    "avx512",
    {MatMulRowsTiled<FloatKernel<F32Weights<Avx512Lanes>>>,
     MatMulRowsTiled<FloatKernel<F16Weights<Avx512Lanes>>>,
     MatMulRowsTiled<FloatKernel<Bf16Weights<Avx512Lanes>>>,
     MatMulRowsTiled<QuantKernel<Q8Block>>, MatMulRowsQ4_0LanesAvx512,
     nullptr,  // Q4_1, Q5_0, Q5_1, IQ4_NL: the AVX2 kernels
     nullptr, nullptr, nullptr, MatMulRowsQ2KAvx512, MatMulRowsQ3KAvx512,
     MatMulRowsQ4KAvx512, MatMulRowsQ5KAvx512, MatMulRowsQ6KAvx512,
     MatMulRowsIq4xsAvx512, MatMulRowsQ4KGroups16Avx512,
     MatMulRowsQ4_0Groups16Avx512},
    nullptr,  // the vector kernels come from the AVX2 table
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    QuantizeRowQ8_KAvx512,
    nullptr,
    nullptr,  // ggml_gemv: the AVX2 form (ggml_vec_dot is memory-bound)
    ggml_compat::dot::Gemv2Avx512,
    ggml_compat::dot::GemmRowsAvx512,
    ggml_compat::dot::SwiGluAvx512,
};

}  // namespace

const KernelTable* Avx512KernelTable() { return &kAvx512Table; }

}  // namespace kvault::kernels

#else  // no AVX-512 in this build

namespace kvault::kernels {
const KernelTable* Avx512KernelTable() { return nullptr; }
}  // namespace kvault::kernels

#endif
