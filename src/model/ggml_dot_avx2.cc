// The AVX2 forms of ggml's float dot orders (ggml_dot.h). A 16-lane order
// (the AVX-512 build's) runs as two 8-lane halves: lanes 0-7 and 8-15 of
// each accumulator see the same FMAs in the same order, so the bits are the
// portable form's. Every fused operation is an intrinsic; the unfused F32
// tail is AddTail (compiled without FMA).
#include <algorithm>
#include <vector>

#include "core/float16.h"
#include "model/ggml_dot.h"
#include "model/kernels/kernels.h"

#ifdef KVAULT_GGML_X86
#include <immintrin.h>

namespace kvault::ggml_compat::dot {
namespace {

// Templated on the weight type so the loops below carry no branch.
template <bool kF16>
KV_GGML_AVX2 inline __m256 LoadWeights8(const std::byte* row, int64_t i) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
}

// The AVX2 build's kGemv reduction of the four accumulators: (a0+a2) +
// (a1+a3), lanes lo+hi, then two hadds.
KV_GGML_AVX2 inline float ReduceGemv8(const __m256* a) {
  const __m256 r =
      _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  t = _mm_hadd_ps(t, t);
  t = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(t);
}

// tinyBLAS's hsum of 8 lanes: hi + lo, lanes 0+2 and 1+3, then those two.
KV_GGML_AVX2 inline float Hsum8(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}

// _mm512_reduce_add_ps of the 16 lanes lo (0-7) and hi (8-15): lanes
// i + (i+8), then i + (i+4), then (l0+l2) + (l1+l3).
KV_GGML_AVX2 inline float Reduce16(__m256 lo, __m256 hi) {
  const __m256 r8 = _mm256_add_ps(lo, hi);
  __m128 t =
      _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));
  return _mm_cvtss_f32(t);
}

// Returns the kGemm horizontal sum of one accumulator's `lanes` lanes.
KV_GGML_AVX2 inline float SumLanes(const float* lane, int lanes) {
  return lanes == 16
             ? Reduce16(_mm256_loadu_ps(lane), _mm256_loadu_ps(lane + 8))
             : Hsum8(_mm256_loadu_ps(lane));
}

// The AVX2 build's kGemv of rows[i] into y[i], i < kRows.
template <bool kF16, int kRows>
KV_GGML_AVX2 void Gemv8(const std::byte* const* rows, const float* x, int64_t k,
                        float* y) {
  const int64_t np = k & ~int64_t{31};
  __m256 a[kRows][4];
  for (auto& row_acc : a) {
    for (__m256& v : row_acc) v = _mm256_setzero_ps();
  }
  for (int64_t l = 0; l < np; l += 32) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256 xv = _mm256_loadu_ps(x + l + 8 * j);
#pragma GCC unroll 2
      for (int i = 0; i < kRows; ++i) {
        a[i][j] = _mm256_fmadd_ps(LoadWeights8<kF16>(rows[i], l + 8 * j), xv,
                                  a[i][j]);
      }
    }
  }
  for (int i = 0; i < kRows; ++i) {
    y[i] = WithTail(ReduceGemv8(a[i]), rows[i], kF16, x, np, k);
  }
}

// The AVX-512 build's kGemv of one row: four 16-lane accumulators over
// 64-value steps, each as two 8-lane halves.
template <bool kF16>
KV_GGML_AVX2 float Gemv16(const std::byte* row, const float* x, int64_t k) {
  const int64_t np = k & ~int64_t{63};
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t l = 0; l < np; l += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t c = l + 16 * j;
      lo[j] = _mm256_fmadd_ps(LoadWeights8<kF16>(row, c),
                              _mm256_loadu_ps(x + c), lo[j]);
      hi[j] = _mm256_fmadd_ps(LoadWeights8<kF16>(row, c + 8),
                              _mm256_loadu_ps(x + c + 8), hi[j]);
    }
  }
  const __m256 r_lo =
      _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
  const __m256 r_hi =
      _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
  return WithTail(Reduce16(r_lo, r_hi), row, kF16, x, np, k);
}

// Continues the kGemm accumulation of 4 rows for kTokens tokens over values
// [l0, l1) of k, from and back into state ([kTokens][4][kLanes] lanes).
// Splitting k into chunks (so rows stay in L1) leaves every lane's
// FMA sequence, hence every bit, unchanged. kLanes 8: 4 x 3 accumulators
// and 4 weight vectors fill AVX2's 16 registers; kLanes 16 (two halves
// per accumulator) takes one token at a time.
template <bool kF16, int kTokens, int kLanes>
KV_GGML_AVX2 void Gemm4Chunk(const std::byte* const* rows,
                             const float* const* x, int64_t l0, int64_t l1,
                             float* state) {
  constexpr int kHalves = kLanes / 8;
  __m256 acc[kTokens][4][kHalves];
  // The first chunk starts from zero rather than reading zeroed state.
  const bool fresh = l0 == 0;
  for (int i = 0; i < kTokens; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int h = 0; h < kHalves; ++h) {
        acc[i][j][h] =
            fresh ? _mm256_setzero_ps()
                  : _mm256_loadu_ps(state + ((4 * i + j) * kHalves + h) * 8);
      }
    }
  }
  // Fully unrolled so the accumulators stay in registers.
  for (int64_t l = l0; l < l1; l += kLanes) {
#pragma GCC unroll 2
    for (int h = 0; h < kHalves; ++h) {
      __m256 w[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) w[j] = LoadWeights8<kF16>(rows[j], l + 8 * h);
#pragma GCC unroll 3
      for (int i = 0; i < kTokens; ++i) {
        const __m256 xv = _mm256_loadu_ps(x[i] + l + 8 * h);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          acc[i][j][h] = _mm256_fmadd_ps(w[j], xv, acc[i][j][h]);
        }
      }
    }
  }
  for (int i = 0; i < kTokens; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int h = 0; h < kHalves; ++h) {
        _mm256_storeu_ps(state + ((4 * i + j) * kHalves + h) * 8, acc[i][j][h]);
      }
    }
  }
}

// Continues the kGemm accumulation of one group of 4 rows over values
// [l0, l1) for every token in gemm; state holds [token][row][kLanes].
template <bool kF16, int kLanes>
KV_GGML_AVX2 void Gemm4Group(const std::byte* const* rows, const float* x,
                             int64_t k, std::span<const uint32_t> gemm,
                             int64_t l0, int64_t l1, float* state) {
  constexpr size_t kTokens = kLanes == 8 ? 3 : 1;
  constexpr size_t kStride = 4 * kLanes;  // state floats per token
  const size_t n = gemm.size();
  size_t i = 0;
  for (; i + kTokens <= n; i += kTokens) {
    const float* xs[kTokens];
    for (size_t m = 0; m < kTokens; ++m) xs[m] = x + gemm[i + m] * k;
    Gemm4Chunk<kF16, kTokens, kLanes>(rows, xs, l0, l1, state + i * kStride);
  }
  for (; i < n; ++i) {
    const float* xs[1] = {x + gemm[i] * k};
    Gemm4Chunk<kF16, 1, kLanes>(rows, xs, l0, l1, state + i * kStride);
  }
}

// GemmGroupsAvx2 for one weight type (kF16: rows read as fp16) and lanes.
template <bool kF16, int kLanes>
KV_GGML_AVX2 void GemmGroups(const std::byte* const* group_rows,
                             int64_t num_groups, const float* x, int64_t k,
                             std::span<const uint32_t> gemm, float* state) {
  const size_t n = gemm.size();
  // Values of k per pass, a multiple of 16: 4 f32 rows of 2048 (32 KiB)
  // stay in L1 for every token; 512 was ~15% slower (kvault bench model
  // F16 pp512, KVAULT_KERNELS=avx2), the state traffic between passes.
  constexpr int64_t kChunk = 2048;
  for (int64_t l0 = 0; l0 < k; l0 += kChunk) {
    const int64_t l1 = std::min(k, l0 + kChunk);
    for (int64_t g = 0; g < num_groups; ++g) {
      Gemm4Group<kF16, kLanes>(&group_rows[4 * g], x, k, gemm, l0, l1,
                               &state[g * n * 4 * kLanes]);
    }
  }
}

}  // namespace

float GemvAvx2(const std::byte* row, bool f16, const float* x, int64_t k,
               GgmlBuild build) {
  if (build == GgmlBuild::kAvx512) {
    return f16 ? Gemv16<true>(row, x, k) : Gemv16<false>(row, x, k);
  }
  float y;
  f16 ? Gemv8<true, 1>(&row, x, k, &y) : Gemv8<false, 1>(&row, x, k, &y);
  return y;
}

void Gemv2Avx2(const std::byte* const* rows, bool f16, const float* x,
               int64_t k, GgmlBuild build, float* y) {
  if (build == GgmlBuild::kAvx512) {
    // Two rows' 16 accumulator halves would not fit the 16 ymm registers.
    for (int i = 0; i < 2; ++i) y[i] = GemvAvx2(rows[i], f16, x, k, build);
    return;
  }
  f16 ? Gemv8<true, 2>(rows, x, k, y) : Gemv8<false, 2>(rows, x, k, y);
}

int64_t GemmGroupsAvx2(const kernels::MatrixView& w, const float* x,
                       std::span<const uint32_t> gemm, int64_t r0, int64_t r1,
                       GgmlBuild build, float* y) {
  const int64_t k = w.cols;
  const int lanes = Lanes(build);
  // F16 rows are converted to f32 once (exactly) rather than per token.
  thread_local std::vector<float> converted;  // [r1 - r0, k]
  const bool convert = w.type == GgmlType::kF16 && gemm.size() >= 2;
  if (convert) {
    converted.resize((r1 - r0) * k);
    for (int64_t i = r0; i < r1; ++i) {
      HalfToFloatRow(std::span(w.data + i * w.row_bytes, 2 * k),
                     std::span(&converted[(i - r0) * k], k));
    }
  }
  const bool row_f16 = w.type == GgmlType::kF16 && !convert;
  const int64_t num_groups = (r1 - r0) / 4;
  std::vector<const std::byte*> rows(4 * num_groups);
  for (int64_t i = 0; i < 4 * num_groups; ++i) {
    rows[i] = convert ? reinterpret_cast<const std::byte*>(&converted[i * k])
                      : w.data + (r0 + i) * w.row_bytes;
  }
  using GroupsFn = void (*)(const std::byte* const*, int64_t, const float*,
                            int64_t, std::span<const uint32_t>, float*);
  const GroupsFn fn =
      lanes == 16 ? (row_f16 ? &GemmGroups<true, 16> : &GemmGroups<false, 16>)
                  : (row_f16 ? &GemmGroups<true, 8> : &GemmGroups<false, 8>);
  // Tokens go in spans whose activations (a k chunk of each) and partial
  // sums stay in L2 while every row group passes over them: a whole
  // pp512 batch's chunk (1 MiB) was re-read from L3 once per group. Each
  // element's FMA sequence is the same whatever the span.
  constexpr size_t kTokenSpan = 48;       // a multiple of Gemm4Group's 3 tokens
  thread_local std::vector<float> state;  // [group, token, row, lane]
  for (size_t s0 = 0; s0 < gemm.size(); s0 += kTokenSpan) {
    const std::span<const uint32_t> span =
        gemm.subspan(s0, std::min(kTokenSpan, gemm.size() - s0));
    const size_t n = span.size();
    state.resize(num_groups * n * 4 * lanes);  // the first pass writes all
    fn(rows.data(), num_groups, x, k, span, state.data());
    for (int64_t g = 0; g < num_groups; ++g) {
      for (size_t i = 0; i < n; ++i) {
        for (int j = 0; j < 4; ++j) {
          y[span[i] * w.rows + r0 + 4 * g + j] =
              SumLanes(&state[((g * n + i) * 4 + j) * lanes], lanes);
        }
      }
    }
  }
  return r0 + 4 * num_groups;
}

int64_t GemmRowsAvx2(const kernels::GgmlGemmArgs& args, int64_t r0,
                     int64_t r1) {
  return GemmGroupsAvx2(*args.w, args.x,
                        std::span(args.tokens, args.num_tokens), r0, r1,
                        args.build, args.y);
}

}  // namespace kvault::ggml_compat::dot

#endif  // KVAULT_GGML_X86
