// The activation quantizers (Q8_0, Q8_1, Q8_K) on aarch64 NEON, each
// writing the bytes of its scalar reference (quant_scalar.cc) bit for bit:
// the same scalar scale arithmetic, one IEEE multiply per value, and
// FCVTNS's round-half-even (with x86's INT_MIN for NaN and out-of-range
// values, as the references have it).
#include "model/kernels/kernel_table.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/float16.h"
#include "model/kernels/neon_kernels.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_neon.inc"

// The largest |x[i]|, i < n (n a multiple of 4), NaN ignored (FMAXNM).
inline float AbsMax(const float* x, int n) {
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  return vmaxnmvq_f32(m);
}

// Narrows 16 int32 lanes (each within int8 after the caller's clamp, or
// any value whose low byte is wanted) to 16 int8, in order.
inline int8x16_t NarrowI32(const int32x4_t q[4]) {
  const int16x8_t a = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
  const int16x8_t b = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
  return vcombine_s8(vmovn_s16(a), vmovn_s16(b));
}

// RoundEven (quant_scalar.cc) per lane: FCVTNS, except that NaN and values
// outside int's range give INT_MIN (x86's "integer indefinite") where
// FCVTNS gives 0 or saturates.
inline int32x4_t RoundEvenLanes(float32x4_t v) {
  const uint32x4_t in_range = vcaltq_f32(v, vdupq_n_f32(2147483648.0f));
  return vbslq_s32(in_range, vcvtnq_s32_f32(v), vdupq_n_s32(INT32_MIN));
}

void StoreHalf(std::byte* p, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(p, &h, sizeof(h));
}

// QuantizeRowQ8_0Act: clamp to [-127, 127] first (NaN stays NaN, and
// FCVTNS makes it 0, as the reference's explicit NaN -> 0).
void QuantizeQ8_0Neon(const float* x, int64_t n, std::byte* out) {
  const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    std::byte* y = out + b * 34;
    const float amax = AbsMax(x, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int h = 0; h < 2; ++h) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k) {
        const float32x4_t v = vmulq_n_f32(vld1q_f32(x + 16 * h + 4 * k), id);
        q[k] = vcvtnq_s32_f32(vminq_f32(vmaxq_f32(v, lo), hi));
      }
      vst1q_s8(reinterpret_cast<int8_t*>(y + 2 + 16 * h), NarrowI32(q));
    }
    StoreHalf(y, d);
  }
}

// QuantizeRowQ8_1: no clamp; NaN lanes (and infinities, where a subnormal
// amax makes 127 / amax overflow) count INT_MIN in the sum, as the
// reference's do.
void QuantizeQ8_1Neon(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    std::byte* y = out + b * q8_1::kBytes;
    const float amax = AbsMax(x, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    uint32x4_t sum = vdupq_n_u32(0);  // wraps as the reference's int does
    for (int h = 0; h < 2; ++h) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k) {
        const float32x4_t v = vmulq_n_f32(vld1q_f32(x + 16 * h + 4 * k), id);
        q[k] = RoundEvenLanes(v);
        sum = vaddq_u32(sum, vreinterpretq_u32_s32(q[k]));
      }
      vst1q_s8(reinterpret_cast<int8_t*>(y + q8_1::kQs + 16 * h), NarrowI32(q));
    }
    const int32_t s = static_cast<int32_t>(vaddvq_u32(sum));
    StoreHalf(y + q8_1::kD, d);
    StoreHalf(y + q8_1::kS, d * static_cast<float>(s));
  }
}

// The first x[i] (i < 256) with |x[i]| == amax: the reference keeps the
// first of equal magnitudes, whatever their signs.
inline float FirstWithMagnitude(const float* x, float amax) {
  const float32x4_t m = vdupq_n_f32(amax);
  for (int i = 0; i < kBlockK; i += 4) {
    if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + i)), m)) != 0) {
      for (int j = i;; ++j) {
        if (std::fabs(x[j]) == amax) return x[j];
      }
    }
  }
  return 0.0f;  // not reached: amax is one of the |x[i]|
}

// QuantizeRowQ8_K: q = min(round(iscale * x), 127), sums of 16.
void QuantizeQ8_KNeon(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    std::byte* y = out + b * q8_k::kBytes;
    const float amax = AbsMax(x, kBlockK);
    if (amax == 0.0f) {
      std::memset(y, 0, q8_k::kBytes);
      continue;
    }
    const float iscale = -127.0f / FirstWithMagnitude(x, amax);
    int16_t bsums[16];
    for (int g = 0; g < 16; ++g) {
      int32x4_t q[4];
      for (int k = 0; k < 4; ++k) {
        const float32x4_t v = vmulq_n_f32(vld1q_f32(x + 16 * g + 4 * k), iscale);
        q[k] = vminq_s32(RoundEvenLanes(v), vdupq_n_s32(127));
      }
      const int8x16_t q8 = NarrowI32(q);
      vst1q_s8(reinterpret_cast<int8_t*>(y + q8_k::kQs + 16 * g), q8);
      bsums[g] = vaddlvq_s8(q8);
    }
    std::memcpy(y + q8_k::kBsums, bsums, sizeof(bsums));
    const float d = 1.0f / iscale;
    std::memcpy(y + q8_k::kD, &d, sizeof(d));
  }
}

}  // namespace

void FillQuantizeNeon(KernelTable* t) {
  t->quantize_q8_0 = QuantizeQ8_0Neon;
  t->quantize_q8_1 = QuantizeQ8_1Neon;
  t->quantize_q8_k = QuantizeQ8_KNeon;
}

}  // namespace kvault::kernels

#endif
