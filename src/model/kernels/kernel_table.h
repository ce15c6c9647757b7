// The per-instruction-set kernel table behind kernels.h. Each ISA file
// (kernels_scalar.cc, kernels_avx2.cc, kernels_avx512.cc) fills one table of
// plain function pointers; kernels.cc picks one at start-up.
//
// This header is included by files compiled with -mavx2/-mavx512*, so it
// must hold no inline functions or templates: a copy emitted there could be
// picked by the linker for generic callers (ODR) and fault on older CPUs.
#ifndef KVAULT_MODEL_KERNELS_KERNEL_TABLE_H_
#define KVAULT_MODEL_KERNELS_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "model/kernels/dot_order.h"

namespace kvault::ggml_compat {
enum class GgmlBuild : uint8_t;  // ggml_compat.h
}  // namespace kvault::ggml_compat

namespace kvault::kernels {

// Weight kinds a MatMul kernel exists for; the index into KernelTable::matmul.
// The comment names the activation format each kind pairs with (see
// quant_scalar.h).
enum WeightKind : int {
  kWeightF32 = 0,
  kWeightF16 = 1,
  kWeightBf16 = 2,
  kWeightQ8_0 = 3,           // Q8_0 activations
  kWeightQ4_0 = 4,           // Q8_0
  kWeightQ4_1 = 5,           // Q8_1
  kWeightQ5_0 = 6,           // Q8_0
  kWeightQ5_1 = 7,           // Q8_1
  kWeightIq4nl = 8,          // Q8_0
  kWeightQ2_K = 9,           // Q8_K
  kWeightQ3_K = 10,          // Q8_K
  kWeightQ4_K = 11,          // Q8_K
  kWeightQ5_K = 12,          // Q8_K
  kWeightQ6_K = 13,          // Q8_K
  kWeightIq4xs = 14,         // Q8_K
  kWeightQ4_KGroups16 = 15,  // Q8_K; layout WeightLayout::kGroups16
  kWeightQ4_0Groups16 = 16,  // Q8_0; layout WeightLayout::kGroups16
  kNumWeightKinds = 17,
};

// One MatMul call as the row kernels see it. For F32/F16/BF16 weights `x`
// holds f32 rows; for quantized weights it holds rows of the paired
// activation format (Q8_0, Q8_1 or Q8_K blocks).
struct MatMulArgs {
  const std::byte* w = nullptr;  // [rows, w_row_bytes]
  size_t w_row_bytes = 0;
  int64_t cols = 0;  // elements per row (block multiple if quantized)
  const std::byte* x = nullptr;  // [num_tokens, x_row_bytes]
  size_t x_row_bytes = 0;
  int64_t num_tokens = 0;
  float* y = nullptr;  // [num_tokens, y_stride]
  int64_t y_stride = 0;
  const DotOrder* orders = nullptr;  // [num_tokens]; null: all kGemv
};

// Computes y[t, r] for every t < num_tokens and r in [row_begin, row_end).
// Every implementation computes each element with one fixed sequence of
// operations, whatever the tiling, so results never depend on the split.
using MatMulRowsFn = void (*)(const MatMulArgs& args, int64_t row_begin,
                              int64_t row_end);

struct MatrixView;  // kernels.h

// One ggml_compat kGemm product (model/ggml_matmul.cc): y[t, r] for the
// listed tokens t, in `build`'s tinyBLAS order.
struct GgmlGemmArgs {
  const MatrixView* w = nullptr;  // F32 or F16 rows
  const float* x = nullptr;       // [tokens, w->cols]
  const uint32_t* tokens = nullptr;
  size_t num_tokens = 0;
  ggml_compat::GgmlBuild build{};
  float* y = nullptr;  // [tokens, w->rows]
};

// One instruction set's kernels; signatures match kernels.h. A null entry
// (a weight kind or vector kernel an ISA has no version of) is taken from
// the next lower table: AVX-512 from AVX2, AVX2 from scalar; NEON-dotprod
// from NEON, NEON from scalar.
struct KernelTable {
  const char* name;
  MatMulRowsFn matmul[kNumWeightKinds];
  void (*rms_norm)(const float* x, const float* weight, int64_t n, float eps,
                   float* out);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  void (*axpy)(float a, const float* x, int64_t n, float* y);
  float (*dot_f16_f32)(const std::byte* a, const float* b, int64_t n);
  void (*axpy_f16)(float s, const std::byte* x, int64_t n, float* y);
  void (*quantize_q8_0)(const float* x, int64_t n, std::byte* out);
  void (*quantize_q8_1)(const float* x, int64_t n, std::byte* out);
  void (*quantize_q8_k)(const float* x, int64_t n, std::byte* out);
  void (*exp)(const float* x, int64_t n, float* out);
  // ggml_compat's float forms (model/ggml_dot_entries.h), each giving the
  // portable form's bits in `build`'s order: row . x in kGemv order; the
  // same for two rows at once; the kGemm products of rows [r0, r1),
  // returning the first row not done (the caller finishes with the
  // portable form); SwiGLU over the leading whole vectors, returning how
  // many values were done.
  float (*ggml_gemv)(const std::byte* row, bool f16, const float* x, int64_t k,
                     ggml_compat::GgmlBuild build);
  void (*ggml_gemv2)(const std::byte* const* rows, bool f16, const float* x,
                     int64_t k, ggml_compat::GgmlBuild build, float* y);
  int64_t (*ggml_gemm_rows)(const GgmlGemmArgs& args, int64_t r0, int64_t r1);
  int64_t (*ggml_swiglu)(const float* gate, const float* up, int64_t n,
                         ggml_compat::GgmlBuild build, float* out);
};

enum class Isa : uint8_t;  // kernels.h

// Returns the table of `isa` with its null entries filled from the lower
// sets' (the one a Kernels value uses) when this binary has it and the CPU
// features in use (core/cpu_features.h, the one detection site) include
// it, else null.
const KernelTable* KernelTableFor(Isa isa);

// Returns the scalar reference table (always available).
const KernelTable* ScalarKernelTable();
// Returns the AVX2+FMA+F16C table, or null when not compiled in.
const KernelTable* Avx2KernelTable();
// Returns the AVX-512 (F/BW/VL/DQ/VNNI) table, or null when not compiled in.
const KernelTable* Avx512KernelTable();
// Returns the aarch64 NEON table, or null when not compiled in.
const KernelTable* NeonKernelTable();
// Returns the NEON table's entries that use SDOT/UDOT, or null when not
// compiled in (its null entries come from the NEON table).
const KernelTable* NeonDotKernelTable();

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_KERNEL_TABLE_H_
