// Internal to ggml_compat: the per-row forms of ggml's float dot products
// that MatMul and DotF16 are built from, in each GgmlBuild's summation
// order. Every form of one order gives the portable form's bits:
//  - portable (ggml_dot.cc): explicit std::fma and float adds, lane by lane;
//  - AVX2 (ggml_dot_avx2.cc): ymm registers; a 16-lane order is run as two
//    8-lane halves (a lane's FMA sequence is the same either way);
//  - AVX-512 (ggml_matmul_avx512.cc): zmm registers.
// Rows hold F32 or F16 weights; x holds floats (for F16 weights, values
// already rounded to fp16, as ggml converts activations).
#ifndef KVAULT_MODEL_GGML_DOT_H_
#define KVAULT_MODEL_GGML_DOT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/check.h"
#include "core/float16.h"
#include "model/ggml_compat.h"
#include "model/ggml_dot_entries.h"
#include "model/kernels/kernel_table.h"
#include "model/kernels/kernels.h"

namespace kvault::ggml_compat::dot {

// Returns the lanes of one of `build`'s float vectors: 8 (AVX2), 16
// (AVX-512). Both of its orders (kGemv, kGemm) work in these lanes.
constexpr int Lanes(GgmlBuild build) {
  return build == GgmlBuild::kAvx512 ? 16 : 8;
}

// Returns true when kGemm (tinyBLAS) serves a matrix of `rows` x `k` in
// `build`: it refuses k not a multiple of its vector's lanes and rows not a
// multiple of 4 (then llama.cpp takes ggml_vec_dot, kGemv, for all tokens).
constexpr bool GemmServes(GgmlBuild build, int64_t rows, int64_t k) {
  return k % Lanes(build) == 0 && rows % 4 == 0;
}

// Returns the kernel table of `isa` (one of kernels::SupportedIsas()),
// whose ggml_* entries are the forms below in that set.
inline const kernels::KernelTable& TableFor(kernels::Isa isa) {
  const kernels::KernelTable* table = kernels::KernelTableFor(isa);
  KV_CHECK(table != nullptr) << "kernel set not supported here";
  return *table;
}

// Returns value i of a weight row.
inline float WeightAt(const std::byte* row, bool f16, int64_t i) {
  if (f16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, row + 4 * i, 4);
  return f;
}

// ---- portable (ggml_dot.cc) ----

// Returns head plus the products of values [begin, end) added one at a
// time as ggml_vec_dot's tails do: F32 unfused in float, F16 in double.
float AddTail(float head, const std::byte* row, bool f16, const float* x,
              int64_t begin, int64_t end);

// AddTail without the call when there is no tail (then its value is head).
inline float WithTail(float head, const std::byte* row, bool f16,
                      const float* x, int64_t begin, int64_t end) {
  return begin == end ? head : AddTail(head, row, f16, x, begin, end);
}

// Returns row . x over k values in `build`'s kGemm order (tinyBLAS): one
// accumulator of Lanes(build) lanes, then its horizontal sum. Requires
// k % Lanes(build) == 0.
float GemmPortable(const std::byte* row, bool f16, const float* x, int64_t k,
                   GgmlBuild build);

#ifdef KVAULT_GGML_X86

// ---- AVX2 (ggml_dot_avx2.cc) ----

// y[t, r] = GemmPortable(row r, x[t]) for the tokens in gemm and rows
// [r0, r0 + 4 g), g = (r1 - r0) / 4; returns r0 + 4 g. Requires
// k % Lanes(build) == 0.
KV_GGML_AVX2 int64_t GemmGroupsAvx2(const kernels::MatrixView& w,
                                    const float* x,
                                    std::span<const uint32_t> gemm, int64_t r0,
                                    int64_t r1, GgmlBuild build, float* y);

// ---- AVX-512 (ggml_matmul_avx512.cc) ----

// GemmGroupsAvx2's results for rows [r0, r1) in tiles of 8 (kAvx2) or 4
// (kAvx512) rows by up to 6 tokens in 24 zmm accumulators; returns the
// first row not done (the rows past the last whole tile).
KV_GGML_AVX512 int64_t GemmTiles512(const kernels::MatrixView& w,
                                    const float* x,
                                    std::span<const uint32_t> gemm, int64_t r0,
                                    int64_t r1, GgmlBuild build, float* y);

#endif  // KVAULT_GGML_X86

}  // namespace kvault::ggml_compat::dot

#endif  // KVAULT_MODEL_GGML_DOT_H_
