// The aarch64 kernel files' entries, declared for kernels_neon.cc's two
// tables (NEON, NEON with SDOT). Each file fills the entries it has code
// for; defined only in aarch64 builds. Declarations only (see
// kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_NEON_KERNELS_H_
#define KVAULT_MODEL_KERNELS_NEON_KERNELS_H_

#include "model/kernels/kernel_table.h"

namespace kvault::kernels {

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL MatMul (legacy_quants_neon*.cc):
// integer dot products with SMULL/SADDLP, or with SDOT.
void FillLegacyNeon(KernelTable* t);
void FillLegacyNeonDot(KernelTable* t);
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS MatMul (kquants_neon*.cc).
void FillKQuantsNeon(KernelTable* t);
void FillKQuantsNeonDot(KernelTable* t);
// rms_norm, softmax, silu_mul, dot_f32, axpy, dot_f16_f32, axpy_f16, exp
// (vector_neon.cc).
void FillVectorNeon(KernelTable* t);
// The Q8_0, Q8_1 and Q8_K activation quantizers (quantize_neon.cc).
void FillQuantizeNeon(KernelTable* t);

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_NEON_KERNELS_H_
