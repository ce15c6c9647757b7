// The kernel-table entries of ggml_compat's forms (KernelTable::ggml_gemv,
// ggml_gemv2, ggml_gemm_rows, ggml_swiglu): declarations only, so the ISA
// files that fill the tables (compiled with -mavx2 and the like) can name
// them without including inline code (kernel_table.h). ggml_dot.h has the
// forms' contracts; ggml_compat.h the orders they reproduce.
#ifndef KVAULT_MODEL_GGML_DOT_ENTRIES_H_
#define KVAULT_MODEL_GGML_DOT_ENTRIES_H_

#include <cstddef>
#include <cstdint>

#include "model/kernels/kernel_table.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KVAULT_GGML_X86 1
#define KV_GGML_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KV_GGML_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c")))
#endif

namespace kvault::ggml_compat::dot {

// ---- the scalar table's (the portable forms, ggml_dot.cc) ----
// Returns row . x over k values in `build`'s kGemv order
// (ggml_vec_dot_f32/f16): four accumulators of Lanes(build) lanes over
// steps of 4 * Lanes(build) values, reduced as that build reduces them,
// then the tail (AddTail).
float GemvPortable(const std::byte* row, bool f16, const float* x, int64_t k,
                   GgmlBuild build);
// y[i] = GemvPortable(rows[i], ...) for i < 2.
void Gemv2Portable(const std::byte* const* rows, bool f16, const float* x,
                   int64_t k, GgmlBuild build, float* y);
// Does none of the rows (the caller's portable loop does them); returns r0.
int64_t GemmRowsPortable(const kernels::GgmlGemmArgs& args, int64_t r0,
                         int64_t r1);
// Does none of the values; returns 0.
int64_t SwiGluPortable(const float* gate, const float* up, int64_t n,
                       GgmlBuild build, float* out);

#ifdef KVAULT_GGML_X86
// ---- the AVX2 table's (ggml_dot_avx2.cc, ggml_compat.cc) ----
// Returns GemvPortable's value.
KV_GGML_AVX2 float GemvAvx2(const std::byte* row, bool f16, const float* x,
                            int64_t k, GgmlBuild build);
// Gemv2Portable's results, the rows' FMA chains interleaved (one row's
// four chains leave FMA units idle).
KV_GGML_AVX2 void Gemv2Avx2(const std::byte* const* rows, bool f16,
                            const float* x, int64_t k, GgmlBuild build,
                            float* y);
// The kGemm products of the whole groups of 4 rows in [r0, r1).
KV_GGML_AVX2 int64_t GemmRowsAvx2(const kernels::GgmlGemmArgs& args, int64_t r0,
                                  int64_t r1);
// SwiGLU in 8-value blocks when build is kAvx2 (else none).
KV_GGML_AVX2 int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n,
                                GgmlBuild build, float* out);

// ---- the AVX-512 table's (ggml_matmul_avx512.cc, ggml_compat.cc) ----
// Gemv2Avx2's results; zmm registers for the kAvx512 order.
KV_GGML_AVX512 void Gemv2Avx512(const std::byte* const* rows, bool f16,
                                const float* x, int64_t k, GgmlBuild build,
                                float* y);
// GemmRowsAvx2's results in tiles of zmm accumulators, then its groups.
KV_GGML_AVX512 int64_t GemmRowsAvx512(const kernels::GgmlGemmArgs& args,
                                      int64_t r0, int64_t r1);
// SwiGLU in 16-value blocks (kAvx512) or SwiGluAvx2's.
KV_GGML_AVX512 int64_t SwiGluAvx512(const float* gate, const float* up,
                                    int64_t n, GgmlBuild build, float* out);
#endif  // KVAULT_GGML_X86

}  // namespace kvault::ggml_compat::dot

#endif  // KVAULT_MODEL_GGML_DOT_ENTRIES_H_
