// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c and called
// only after CPU detection, so this file is self-contained: intrinsics and
// internal-linkage helpers only, no inline functions or templates from
// shared headers (their out-of-line copies would carry AVX2 code; see
// kernel_table.h).
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

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
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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

struct Q8Block {
  static constexpr int64_t kBytes = kQ8Bytes;
  static __m256i Quants(const std::byte* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
};

// Exact int32 lanes of one block's dot product (each lane sums 4 adjacent
// products): |w| * sign(x, w) keeps maddubs' int16 pairs from saturating.
inline __m256i BlockDot(__m256i w_abs, __m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Quantized weights . Q8_0 activations; per block and element:
// acc = fma(float(int32 lanes), dw * dx, acc).
template <class Block>
struct QuantKernel {
  static constexpr int kRowTile = 2;
  static constexpr int kTokenTile = 4;

  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const std::byte* w[R];
    const std::byte* x[T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) x[t] = a.x + (t0 + t) * a.x_row_bytes;
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const int64_t num_blocks = a.cols / kBlock;
    for (int64_t b = 0; b < num_blocks; ++b) {
      if constexpr (T == 1)
        PrefetchNextRows<R>(w, a.w_row_bytes, b * Block::kBytes);
      __m256i wq[R], wa[R];
      float dw[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const std::byte* blk = w[r] + b * Block::kBytes;
        wq[r] = Block::Quants(blk);
        wa[r] = _mm256_sign_epi8(wq[r], wq[r]);
        dw[r] = HalfAt(blk);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const std::byte* xb = x[t] + b * kQ8Bytes;
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
        const float dx = HalfAt(xb);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 p = _mm256_cvtepi32_ps(BlockDot(wa[r], wq[r], xq));
          acc[r][t] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw[r] * dx), acc[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
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
     MatMulRowsTiled<QuantKernel<Q8Block>>,
     MatMulRowsQ4_0LanesAvx2, MatMulRowsQ4_1Avx2, MatMulRowsQ5_0Avx2,
     MatMulRowsQ5_1Avx2, MatMulRowsIq4nlAvx2, MatMulRowsQ2KAvx2,
     MatMulRowsQ3KAvx2, MatMulRowsQ4KAvx2, MatMulRowsQ5KAvx2,
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
};

}  // namespace

const KernelTable* Avx2KernelTable() { return &kAvx2Table; }

}  // namespace kvault::kernels

#else  // no AVX2 in this build

namespace kvault::kernels {
const KernelTable* Avx2KernelTable() { return nullptr; }
}  // namespace kvault::kernels

#endif
