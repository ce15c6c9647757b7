// MatMul kernels for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL with the
// dot-product extension (SDOT: 16 int8 products into 4 int32 lanes in one
// instruction). Built with -march=armv8.2-a+dotprod and called only when the
// CPU has it (intrinsics and internal-linkage helpers only; see
// kernel_table.h); the kernels are legacy_quants_neon.inc's.
#include "model/kernels/kernel_table.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "model/kernels/neon_kernels.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_neon.inc"

// Lane l += a[4l .. 4l + 3] . b[4l .. 4l + 3], exactly SDOT.
inline int32x4_t Dot4Lanes(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return vdotq_s32(acc, a, b);
}

inline int32x4_t DotAccum(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return vdotq_s32(acc, a, b);
}

#include "model/kernels/legacy_quants_neon.inc"

}  // namespace

void FillLegacyNeonDot(KernelTable* t) { FillLegacyEntries(t); }

}  // namespace kvault::kernels

#endif
