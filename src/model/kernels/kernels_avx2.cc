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
constexpr int64_t kQ4Bytes = 18;  // Q4_0 block: f16 d + 16 nibble pairs
constexpr int64_t kBlock = 32;

#include "model/kernels/helpers_avx2.inc"

// Decode streams each weight row once; rows are often exactly one 4 KiB
// page, where the hardware prefetchers stop, so fetch the same offset of
// the next row group while working on this one. (Prefetches do not change
// results.)
template <int R>
inline void PrefetchNextRows(const std::byte* const* w, size_t row_bytes,
                             int64_t offset) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // Integer arithmetic: past the last row this points beyond the matrix
    // (harmless for a prefetch, but not a valid pointer to form).
    const uintptr_t addr = reinterpret_cast<uintptr_t>(w[r]) + R * row_bytes +
                           static_cast<uintptr_t>(offset);
    _mm_prefetch(reinterpret_cast<const char*>(addr), _MM_HINT_T0);
  }
}

struct F32Load {
  static constexpr int64_t kBytes = 4;
  static __m256 Vec(const std::byte* p, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  }
  static float One(const std::byte* p, int64_t i) {
    float f;
    std::memcpy(&f, p + 4 * i, sizeof(f));
    return f;
  }
};

struct F16Load {
  static constexpr int64_t kBytes = 2;
  static __m256 Vec(const std::byte* p, int64_t i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
  }
  static float One(const std::byte* p, int64_t i) { return HalfAt(p + 2 * i); }
};

struct Bf16Load {
  static constexpr int64_t kBytes = 2;
  static __m256 Vec(const std::byte* p, int64_t i) {
    const __m256i u = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  static float One(const std::byte* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof(h));
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
};

// Float weights: acc[r][t] += w[r, i:i+8] * x[t, i:i+8], then a fixed
// horizontal sum and an in-order scalar tail.
template <class Load>
struct FloatKernel {
  static constexpr int kRowTile = 4;
  static constexpr int kTokenTile = 2;

  template <int R, int T>
  static void Tile(const MatMulArgs& a, int64_t r0, int64_t t0) {
    const std::byte* w[R];
    const float* x[T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = a.w + (r0 + r) * a.w_row_bytes;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      x[t] = reinterpret_cast<const float*>(a.x + (t0 + t) * a.x_row_bytes);
    }
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const int64_t n8 = a.cols & ~int64_t{7};
    for (int64_t i = 0; i < n8; i += 8) {
      if constexpr (T == 1) {
        if ((i & 15) == 0)
          PrefetchNextRows<R>(w, a.w_row_bytes, i * Load::kBytes);
      }
      __m256 wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wv[r] = Load::Vec(w[r], i);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_loadu_ps(x[t] + i);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        float s = HSum(acc[r][t]);
        for (int64_t i = n8; i < a.cols; ++i) {
          s = __builtin_fmaf(Load::One(w[r], i), x[t][i], s);
        }
        a.y[(t0 + t) * a.y_stride + r0 + r] = s;
      }
    }
  }
};

struct Q8Block {
  static constexpr int64_t kBytes = kQ8Bytes;
  static __m256i Quants(const std::byte* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
};

struct Q4Block {
  static constexpr int64_t kBytes = kQ4Bytes;
  // Byte j holds value j (low nibble) and value j + 16 (high nibble).
  static __m256i Quants(const std::byte* blk) {
    const __m128i bytes =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(bytes, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
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
    {MatMulRowsTiled<FloatKernel<F32Load>>,
     MatMulRowsTiled<FloatKernel<F16Load>>,
     MatMulRowsTiled<FloatKernel<Bf16Load>>,
     MatMulRowsTiled<QuantKernel<Q8Block>>,
     MatMulRowsTiled<QuantKernel<Q4Block>>, MatMulRowsQ4_1Avx2,
     MatMulRowsQ5_0Avx2, MatMulRowsQ5_1Avx2, MatMulRowsIq4nlAvx2,
     MatMulRowsQ2KAvx2, MatMulRowsQ3KAvx2, MatMulRowsQ4KAvx2, MatMulRowsQ5KAvx2,
     MatMulRowsQ6KAvx2, MatMulRowsIq4xsAvx2},
    RmsNormAvx2,
    SoftmaxAvx2,
    SiluMulAvx2,
    DotF32Avx2,
    AxpyAvx2,
    DotF16F32Avx2,
    AxpyF16Avx2,
    QuantizeQ8_0Avx2,
    nullptr,  // Q8_1 and Q8_K activations: the scalar quantizers
    nullptr,
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
