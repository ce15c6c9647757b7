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

// Exact int32 lanes of one block's dot product (each lane sums 4 adjacent
// products): |w| * sign(x, w) keeps maddubs' int16 pairs from saturating.
inline __m256i BlockDot(__m256i w_abs, __m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// The f16 scales at p[i] + offset for i < 4 as floats.
inline __m128 HalvesAt4(const std::byte* const* p, int64_t offset) {
  uint16_t h[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) std::memcpy(&h[i], p[i] + offset, sizeof(h[i]));
  uint64_t packed;
  std::memcpy(&packed, h, sizeof(packed));
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(packed)));
}

// Q8_0 weights . Q8_0 activations; per block and element:
// acc = fma(float(int32 lanes), dw * dx, acc). A tile's R x T scale
// products are one vector multiply per row and block (the same float
// products as one at a time), read back by broadcast loads, so the FMA
// ports see only each pair's integer dot, convert and FMA.
// 2 rows x 4 tokens measured best (kernels_bench, 2048 x 2048, 64 tokens,
// one thread: 4 x 2, 3 x 3 and 2 x 3 were 6-16% slower); widening both
// sides to int16 for vpmaddwd (fewer operations per pair, twice the bytes)
// was 12% slower.
struct Q8_0Kernel {
  static constexpr int kRowTile = 2;
  static constexpr int kTokenTile = 4;

  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const std::byte* w[R];
    const std::byte* x[4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes;
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      x[t] = a.x + (t0 + (t < T ? t : 0)) * a.x_row_bytes;
    }
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    alignas(16) float scale[R][4];  // [r][t] = dw[r] * dx[t]
    const int64_t num_blocks = a.cols / kBlock;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const int64_t offset = b * kQ8Bytes;
      if constexpr (T == 1) PrefetchNextRows<R>(w, a.w_row_bytes, offset);
      const __m128 dx = HalvesAt4(x, offset);
      __m256i wq[R], wa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm_store_ps(scale[r],
                     _mm_mul_ps(_mm_set1_ps(HalfAt(w[r] + offset)), dx));
        wq[r] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(w[r] + offset + 2));
        wa[r] = _mm256_sign_epi8(wq[r], wq[r]);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i xq = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x[t] + offset + 2));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 p = _mm256_cvtepi32_ps(BlockDot(wa[r], wq[r], xq));
          acc[r][t] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&scale[r][t]),
                                      acc[r][t]);
        }
      }
    }
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
     MatMulRowsTiled<Q8_0Kernel>,
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
