// The aarch64 kernel tables: NEON (every aarch64 CPU), and NEON with
// SDOT/UDOT. Each entry comes from the file that has its code
// (neon_kernels.h); the float-weight MatMul lives here. A null entry falls
// back to the next lower table (kernel_table.h): the kGroups16 kinds, which
// PrefersGroups16 never picks on aarch64, run the scalar references.
#include "model/kernels/kernel_table.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cstring>

#include "model/kernels/neon_kernels.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_neon.inc"

// The lanes of float_matmul.inc: 8 floats as two registers, so that the
// float MatMul sums in the AVX2 kernel's lanes and order, and an ARM
// machine computes what an AVX2 one does.
struct NeonLanes {
  using F = F8;
  static constexpr int64_t kLanes = 8;
  static constexpr int kTokenTile = 2;
  static F Zero() { return ZeroF8(); }
  static F LoadF32(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  static F LoadF16(const std::byte* p) {
    const float16x8_t h = vreinterpretq_f16_u16(
        vld1q_u16(reinterpret_cast<const uint16_t*>(p)));
    return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
  }
  static F LoadBf16(const std::byte* p) {
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(p));
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
  }
  static F Fma(F a, F b, F acc) { return FmaF8(a, b, acc); }
  static float Sum(F v) { return HSumF8(v); }
};

#include "model/kernels/float_matmul.inc"
#include "model/kernels/matmul_tiling.inc"

KernelTable MakeNeonTable() {
  KernelTable t{};
  t.name = "neon";
  t.matmul[kWeightF32] = MatMulRowsTiled<FloatKernel<F32Weights<NeonLanes>>>;
  t.matmul[kWeightF16] = MatMulRowsTiled<FloatKernel<F16Weights<NeonLanes>>>;
  t.matmul[kWeightBf16] = MatMulRowsTiled<FloatKernel<Bf16Weights<NeonLanes>>>;
  FillLegacyNeon(&t);
  FillKQuantsNeon(&t);
  FillVectorNeon(&t);
  FillQuantizeNeon(&t);
  return t;
}

// The integer dot products only; the rest is the NEON table's.
KernelTable MakeNeonDotTable() {
  KernelTable t{};
  t.name = "neon-dotprod";
  FillLegacyNeonDot(&t);
  FillKQuantsNeonDot(&t);
  return t;
}

}  // namespace

const KernelTable* NeonKernelTable() {
  static const KernelTable kTable = MakeNeonTable();
  return &kTable;
}

const KernelTable* NeonDotKernelTable() {
  static const KernelTable kTable = MakeNeonDotTable();
  return &kTable;
}

}  // namespace kvault::kernels

#else  // not aarch64

namespace kvault::kernels {
const KernelTable* NeonKernelTable() { return nullptr; }
const KernelTable* NeonDotKernelTable() { return nullptr; }
}  // namespace kvault::kernels

#endif
