// The vector kernels (norm, softmax, SiLU, attention dot/axpy, exp) on
// aarch64 NEON. They follow the AVX2 kernels (elementwise_avx2.inc) step
// for step, 8 float lanes as two registers and the same reductions, so an
// ARM machine computes what an AVX2 one does (the scalar references sum
// differently; the tests compare within rounding).
#include "model/kernels/kernel_table.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "model/kernels/neon_kernels.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_neon.inc"

// e^x for 4 lanes, ExpAvx2's steps: x = n ln2 + r, |r| <= ln2/2, e^r by
// its degree-6 Taylor polynomial, 2^n built in the exponent bits. Lanes
// below -87.3 give 0 (so a -inf mask entry vanishes), above 88.3 clamp.
inline float32x4_t Exp4(float32x4_t x) {
  const float32x4_t k_min = vdupq_n_f32(-87.3f);
  const uint32x4_t underflow = vcltq_f32(x, k_min);
  x = vminq_f32(vmaxq_f32(x, k_min), vdupq_n_f32(88.3f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145752f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.42860677e-6f));
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  // n in [-126, 128]: split 2^n = 2^(n/2) * 2^(n - n/2) to stay normal.
  const int32x4_t ni = vcvtnq_s32_f32(n);
  const int32x4_t n1 = vshrq_n_s32(ni, 1);
  const int32x4_t n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 =
      vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 =
      vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  const float32x4_t e = vmulq_f32(vmulq_f32(p, s1), s2);
  return vreinterpretq_f32_u32(
      vbicq_u32(vreinterpretq_u32_f32(e), underflow));
}

// Scalar e^x through the same polynomial (for tails).
inline float ExpOne(float x) { return vgetq_lane_f32(Exp4(vdupq_n_f32(x)), 0); }

inline F8 LoadF8(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }

inline F8 LoadHalf8(const std::byte* p) {
  const float16x8_t h = vreinterpretq_f16_u16(
      vld1q_u16(reinterpret_cast<const uint16_t*>(p)));
  return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
}

inline void StoreF8(float* p, F8 v) {
  vst1q_f32(p, v.lo);
  vst1q_f32(p + 4, v.hi);
}

inline F8 AddF8(F8 a, F8 b) {
  return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
}

inline F8 ScaleF8(F8 a, float32x4_t s) {
  return {vmulq_f32(a.lo, s), vmulq_f32(a.hi, s)};
}

// Two 8-lane accumulators over 16 values, then 8, added before the sum.
template <F8 (*kLoadA)(const std::byte*), int kBytesA>
float Dot8(const std::byte* a, const float* b, int64_t n, int64_t* i_out) {
  F8 acc0 = ZeroF8(), acc1 = ZeroF8();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = FmaF8(kLoadA(a + kBytesA * i), LoadF8(b + i), acc0);
    acc1 = FmaF8(kLoadA(a + kBytesA * (i + 8)), LoadF8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = FmaF8(kLoadA(a + kBytesA * i), LoadF8(b + i), acc0);
  }
  *i_out = i;
  return HSumF8(AddF8(acc0, acc1));
}

F8 LoadF32Bytes(const std::byte* p) {
  return LoadF8(reinterpret_cast<const float*>(p));
}

float DotF32Neon(const float* a, const float* b, int64_t n) {
  int64_t i;
  float s = Dot8<LoadF32Bytes, 4>(reinterpret_cast<const std::byte*>(a), b, n,
                                  &i);
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

float DotF16F32Neon(const std::byte* a, const float* b, int64_t n) {
  int64_t i;
  float s = Dot8<LoadHalf8, 2>(a, b, n, &i);
  for (; i < n; ++i) s = std::fma(HalfAt(a + 2 * i), b[i], s);
  return s;
}

void AxpyNeon(float alpha, const float* x, int64_t n, float* y) {
  const float32x4_t av = vdupq_n_f32(alpha);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), av, vld1q_f32(x + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

void AxpyF16Neon(float alpha, const std::byte* x, int64_t n, float* y) {
  const float32x4_t av = vdupq_n_f32(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F8 xv = LoadHalf8(x + 2 * i);
    vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), av, xv.lo));
    vst1q_f32(y + i + 4, vfmaq_f32(vld1q_f32(y + i + 4), av, xv.hi));
  }
  for (; i < n; ++i) y[i] = std::fma(alpha, HalfAt(x + 2 * i), y[i]);
}

void RmsNormNeon(const float* x, const float* weight, int64_t n, float eps,
                 float* out) {
  F8 acc = ZeroF8();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F8 v = LoadF8(x + i);
    acc = FmaF8(v, v, acc);
  }
  float sum = HSumF8(acc);
  for (; i < n; ++i) sum = std::fma(x[i], x[i], sum);
  const float mean = sum / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  const float32x4_t sv = vdupq_n_f32(scale);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t v = vmulq_f32(vld1q_f32(x + i), sv);
    vst1q_f32(out + i, vmulq_f32(v, vld1q_f32(weight + i)));
  }
  for (; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void SoftmaxNeon(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  int64_t i = 0;
  if (n >= 4) {
    float32x4_t mv = vld1q_f32(x);
    for (i = 4; i + 4 <= n; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
    max = vmaxvq_f32(mv);  // a max is exact in any order
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const float32x4_t maxv = vdupq_n_f32(max);
  F8 acc = ZeroF8();
  for (i = 0; i + 8 <= n; i += 8) {
    const F8 v = LoadF8(x + i);
    const F8 e = {Exp4(vsubq_f32(v.lo, maxv)), Exp4(vsubq_f32(v.hi, maxv))};
    StoreF8(x + i, e);
    acc = AddF8(acc, e);
  }
  float sum = HSumF8(acc);
  for (; i < n; ++i) {
    x[i] = ExpOne(x[i] - max);
    sum += x[i];
  }
  const float32x4_t iv = vdupq_n_f32(1.0f / sum);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), iv));
  for (; i < n; ++i) x[i] *= vgetq_lane_f32(iv, 0);
}

// Every lane, tail included, goes through Exp4, so out[i] depends on x[i]
// alone (not on n or on i's position in a vector).
void ExpNeon(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, Exp4(vld1q_f32(x + i)));
  for (; i < n; ++i) out[i] = ExpOne(x[i]);
}

void SiluMulNeon(const float* gate, const float* up, int64_t n, float* out) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t s = vdivq_f32(g, vaddq_f32(one, Exp4(vnegq_f32(g))));
    vst1q_f32(out + i, vmulq_f32(s, vld1q_f32(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + ExpOne(-gate[i])) * up[i];
}

}  // namespace

void FillVectorNeon(KernelTable* t) {
  t->rms_norm = RmsNormNeon;
  t->softmax = SoftmaxNeon;
  t->silu_mul = SiluMulNeon;
  t->dot_f32 = DotF32Neon;
  t->axpy = AxpyNeon;
  t->dot_f16_f32 = DotF16F32Neon;
  t->axpy_f16 = AxpyF16Neon;
  t->exp = ExpNeon;
}

}  // namespace kvault::kernels

#endif
