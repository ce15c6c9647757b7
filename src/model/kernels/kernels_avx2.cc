// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c and called
// only after CPU detection, so this file is self-contained: intrinsics and
// internal-linkage helpers only, no inline functions or templates from
// shared headers (their out-of-line copies would carry AVX2 code; see
// kernel_table.h).
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "model/ggml_dot_entries.h"
#include "model/kernels/kquant_kernels.h"

namespace kvault::kernels {
namespace {

constexpr int64_t kQ8Bytes = 34;  // Q8_0 block: f16 d + 32 int8
constexpr int64_t kBlock = 32;

#include "model/kernels/helpers_avx2.inc"

// The AVX2 lanes of float_matmul.inc.
struct Avx2Lanes {
  using F = __m256;
  static constexpr int64_t kLanes = 8;
  static constexpr int kTokenTile = 2;
  static F Zero() { return _mm256_setzero_ps(); }
  static F LoadF32(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadF16(const std::byte* p) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F LoadBf16(const std::byte* p) {
    const __m256i u = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  static F Fma(F a, F b, F acc) { return _mm256_fmadd_ps(a, b, acc); }
  static float Sum(F v) { return HSum(v); }
};

#include "model/kernels/float_matmul.inc"

// Exact int32 lanes of one block's dot product (each lane sums 4 adjacent
// products): |w| * sign(x, w) keeps maddubs' int16 pairs from saturating.
inline __m256i BlockDot(__m256i w_abs, __m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Q8_0 weights . Q8_0 activations; per block and element:
// acc = fma(float(int32 lanes), dw * dx, acc). Token tiles read what
// PrepareTokens and PrepareRows computed once per token chunk and row tile
// (the scales as floats, |w| for BlockDot), and a tile's R x 4 scale
// products are one vector multiply per row and block (the same float
// products as one at a time) read back by broadcast loads, so the FMA
// ports see little besides each pair's sign, maddubs, madd, convert and
// FMA. 2 rows x 4 tokens measured best (kernels_bench, 2048 x 2048, 64
// tokens, one thread: 4 x 2, 3 x 3 and 2 x 3 were 6-16% slower); widening
// both sides to int16 for vpmaddwd (fewer operations per pair, twice the
// bytes) was 12% slower. Single tokens read the blocks as stored.
struct Q8_0Kernel {
  static constexpr int kRowTile = 2;
  static constexpr int kTokenTile = 4;

  // The thread's token chunk: scales [block][token], so a tile's four
  // scales of a block load as one vector.
  struct Tokens {
    std::vector<float> scales;
    int64_t begin = 0;
    int64_t count = 0;
  };
  static Tokens& PreparedTokens() {
    thread_local Tokens tokens;
    return tokens;
  }

  // Converts the scales of tokens [t_begin, t_end); MatMulRowsTiled calls
  // it once per token chunk.
  static void PrepareTokens(const MatMulArgs& a, int64_t t_begin,
                            int64_t t_end) {
    const int64_t num_blocks = a.cols / kBlock;
    Tokens& tokens = PreparedTokens();
    tokens.begin = t_begin;
    tokens.count = t_end - t_begin;
    tokens.scales.resize(tokens.count * num_blocks);
    for (int64_t t = 0; t < tokens.count; ++t) {
      const std::byte* row = a.x + (t_begin + t) * a.x_row_bytes;
      for (int64_t b = 0; b < num_blocks; ++b) {
        tokens.scales[b * tokens.count + t] = HalfAt(row + b * kQ8Bytes);
      }
    }
  }

  // The thread's row tile: |w| and the scales, [block][row].
  struct AbsBlock {
    __m256i v;  // |w| of one block's quants
  };
  struct Rows {
    std::vector<AbsBlock> abs;
    std::vector<float> scales;
  };
  static Rows& PreparedRows() {
    thread_local Rows rows;
    return rows;
  }

  // Prepares rows [r0, r0 + R); TokenLoop calls it before their token
  // tiles.
  template <int R>
  static void PrepareRows(const MatMulArgs& a, int64_t r0) {
    const int64_t num_blocks = a.cols / kBlock;
    Rows& rows = PreparedRows();
    rows.abs.resize(num_blocks * R);
    rows.scales.resize(num_blocks * R);
    for (int64_t b = 0; b < num_blocks; ++b) {
      for (int r = 0; r < R; ++r) {
        const std::byte* blk = a.w + (r0 + r) * a.w_row_bytes + b * kQ8Bytes;
        // The next row tile's block, into L2: its PrepareRows then finds
        // it there rather than stalling on memory (a row tile's token
        // tiles read only L1/L2, so the hardware prefetchers lose the
        // weight stream between calls). kernels_bench BM_MatMul/3/2048/
        // 64/1/1: 70.7-75.4 -> 76.2-77.1 GFLOP/s.
        _mm_prefetch(reinterpret_cast<const char*>(blk + R * a.w_row_bytes),
                     _MM_HINT_T1);
        const __m256i wq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        rows.abs[b * R + r].v = _mm256_sign_epi8(wq, wq);
        rows.scales[b * R + r] = HalfAt(blk);
      }
    }
  }

  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    if constexpr (T == kTokenTile) {
      TilePrepared<R>(a, r0, t0);
    } else {
      static_assert(T == 1, "token tiles are kTokenTile or single tokens");
      TileStored<R>(a, r0, t0);
    }
  }

  // y for rows [r0, r0 + R) and tokens [t0, t0 + 4), both prepared.
  template <int R>
  static void TilePrepared(const MatMulArgs& a, int64_t r0, int64_t t0) {
    constexpr int T = kTokenTile;
    const Tokens& tokens = PreparedTokens();
    const AbsBlock* abs = PreparedRows().abs.data();
    const float* dw = PreparedRows().scales.data();
    const float* dx = tokens.scales.data() + (t0 - tokens.begin);
    const int64_t dx_stride = tokens.count;
    const std::byte* w[R];
    const std::byte* x[T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes + 2;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_row_bytes + 2;
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    alignas(16) float scale[R][T];  // dw[r] * dx[t] of the current block
    const int64_t num_blocks = a.cols / kBlock;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const int64_t offset = b * kQ8Bytes;
      const __m128 dx4 = _mm_loadu_ps(dx + b * dx_stride);
      __m256i wq[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_store_ps(scale[r], _mm_mul_ps(_mm_set1_ps(dw[b * R + r]), dx4));
        wq[r] =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + offset));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t] + offset));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 p =
              _mm256_cvtepi32_ps(BlockDot(abs[b * R + r].v, wq[r], xq));
          acc[r][t] =
              _mm256_fmadd_ps(p, _mm256_broadcast_ss(&scale[r][t]), acc[r][t]);
        }
      }
    }
    Store<R, T>(a, r0, t0, acc);
  }

  // y for rows [r0, r0 + R) and token t0 from the blocks as stored.
  template <int R>
  static void TileStored(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const std::byte* w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes;
    const std::byte* x = a.x + t0 * a.x_row_bytes;
    __m256 acc[R][1];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_setzero_ps();
    const int64_t num_blocks = a.cols / kBlock;
    for (int64_t b = 0; b < num_blocks; ++b) {
      PrefetchNextRows<R>(w, a.w_row_bytes, b * kQ8Bytes);
      const std::byte* xb = x + b * kQ8Bytes;
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
      const float dx = HalfAt(xb);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const std::byte* blk = w[r] + b * kQ8Bytes;
        const __m256i wq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256 p =
            _mm256_cvtepi32_ps(BlockDot(_mm256_sign_epi8(wq, wq), wq, xq));
        acc[r][0] =
            _mm256_fmadd_ps(p, _mm256_set1_ps(HalfAt(blk) * dx), acc[r][0]);
      }
    }
    Store<R, 1>(a, r0, t0, acc);
  }

  template <int R, int T>
  static void Store(const MatMulArgs& a, int64_t r0, int64_t t0,
                    const __m256 (&acc)[R][T]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        a.y[(t0 + t) * a.y_stride + r0 + r] = HSum(acc[r][t]);
      }
    }
  }
};

#include "model/kernels/elementwise_avx2.inc"
#include "model/kernels/matmul_tiling.inc"

constexpr KernelTable kAvx2Table = {
    "avx2",
    {MatMulRowsTiled<FloatKernel<F32Weights<Avx2Lanes>>>,
     MatMulRowsTiled<FloatKernel<F16Weights<Avx2Lanes>>>,
     MatMulRowsTiled<FloatKernel<Bf16Weights<Avx2Lanes>>>,
     MatMulRowsTiled<Q8_0Kernel>, MatMulRowsQ4_0LanesAvx2, MatMulRowsQ4_1Avx2,
     MatMulRowsQ5_0Avx2, MatMulRowsQ5_1Avx2, MatMulRowsIq4nlLanesAvx2,
     MatMulRowsQ2KAvx2, MatMulRowsQ3KAvx2, MatMulRowsQ4KAvx2, MatMulRowsQ5KAvx2,
     MatMulRowsQ6KAvx2, MatMulRowsIq4xsAvx2, MatMulRowsQ4KGroups16Avx2,
     MatMulRowsQ4_0Groups16Avx2},
    RmsNormAvx2,
    SoftmaxAvx2,
    SiluMulAvx2,
    DotF32Avx2,
    AxpyAvx2,
    DotF16F32Avx2,
    AxpyF16Avx2,
    QuantizeQ8_0Avx2,
    nullptr,  // Q8_1 activations: the scalar quantizer
    QuantizeRowQ8_KAvx2,
    ExpAvx2Row,
    ggml_compat::dot::GemvAvx2,
    ggml_compat::dot::Gemv2Avx2,
    ggml_compat::dot::GemmRowsAvx2,
    ggml_compat::dot::SwiGluAvx2,
};

}  // namespace

const KernelTable* Avx2KernelTable() { return &kAvx2Table; }

}  // namespace kvault::kernels

#else  // no AVX2 in this build

namespace kvault::kernels {
const KernelTable* Avx2KernelTable() { return nullptr; }
}  // namespace kvault::kernels

#endif
