// MatMul kernels for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL on any
// aarch64 CPU (baseline NEON: products by SMULL, sums by SADDLP/ADDP); the
// kernels themselves are legacy_quants_neon.inc's.
#include "model/kernels/kernel_table.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "model/kernels/neon_kernels.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_neon.inc"

// Lane l += a[4l .. 4l + 3] . b[4l .. 4l + 3]: 16 int16 products, pairs
// widened to int32, then adjacent pairs added, so each lane holds exactly
// the four products SDOT would give it (the float steps read the lanes).
inline int32x4_t Dot4Lanes(int32x4_t acc, int8x16_t a, int8x16_t b) {
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

// The lanes' total += a . b; cheaper where only the total is read.
inline int32x4_t DotAccum(int32x4_t acc, int8x16_t a, int8x16_t b) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#include "model/kernels/legacy_quants_neon.inc"

}  // namespace

void FillLegacyNeon(KernelTable* t) { FillLegacyEntries(t); }

}  // namespace kvault::kernels

#endif
