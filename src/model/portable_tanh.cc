#include "model/portable_tanh.h"

#include <bit>
#include <cstdint>
#include <limits>

namespace kvault {
namespace {

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

// y * 2^k by adding k to y's biased exponent (y normal, result normal).
float AddToExponent(float y, int32_t k) {
  return FromBits(Bits(y) + static_cast<uint32_t>(k) * (1u << 23));
}

// ln 2 split so that k * kLn2Hi is exact for the k reached here.
constexpr float kLn2Hi = 6.9313812256e-01f;   // 0x3f317180
constexpr float kLn2Lo = 9.0580006145e-06f;   // 0x3717f7d1
constexpr float kInvLn2 = 1.4426950216e+00f;  // 0x3fb8aa3b
// The rational approximation's coefficients (of r^2 / 2, on |r| <= ln2/2).
constexpr float kQ[5] = {-3.3333335072e-02f, 1.5873016091e-03f,
                         -7.9365076090e-05f, 4.0082177293e-06f,
                         -2.0109921195e-07f};

// x = k ln2 + r with |r| <= ln2 / 2 (as hi - lo), c the rounding error
// of r; only for 0.5 ln2 < |x| < 27 ln2.
struct Reduced {
  float r;
  float c;
  int32_t k;
};

Reduced Reduce(float x) {
  const bool negative = x < 0.0f;
  const uint32_t abs_bits = Bits(x) & 0x7fffffffu;
  float hi, lo;
  int32_t k;
  if (abs_bits < 0x3F851592u) {  // |x| < 1.5 ln2: k = +-1
    k = negative ? -1 : 1;
    hi = negative ? x + kLn2Hi : x - kLn2Hi;
    lo = negative ? -kLn2Lo : kLn2Lo;
  } else {
    k = static_cast<int32_t>(kInvLn2 * x + (negative ? -0.5f : 0.5f));
    const float t = static_cast<float>(k);
    hi = x - t * kLn2Hi;
    lo = t * kLn2Lo;
  }
  const float r = hi - lo;
  return {r, (hi - r) - lo, k};
}

// expm1 of the reduced argument scaled back by 2^k.
float ScaleBack(float r, float c, int32_t k, float hxs, float e) {
  e = r * (e - c) - c;
  e -= hxs;
  if (k == -1) return 0.5f * (r - e) - 0.5f;
  if (k == 1) {
    return r < -0.25f ? -2.0f * (e - (r + 0.5f)) : 1.0f + 2.0f * (r - e);
  }
  if (k <= -2 || k > 56) return AddToExponent(1.0f - (e - r), k) - 1.0f;
  if (k < 23) {
    const float one_minus = FromBits(0x3f800000u - (0x1000000u >> k));
    return AddToExponent(one_minus - (e - r), k);
  }
  const float two_to_minus_k = FromBits(static_cast<uint32_t>(0x7f - k) << 23);
  return AddToExponent((r - (e + two_to_minus_k)) + 1.0f, k);
}

}  // namespace

float PortableExpm1(float x) {
  const uint32_t abs_bits = Bits(x) & 0x7fffffffu;
  const bool negative = (Bits(x) >> 31) != 0;
  if (abs_bits >= 0x4195b844u) {               // |x| >= 27 ln2
    if (abs_bits > 0x7f800000u) return x + x;  // NaN
    if (negative) return -1.0f;
    if (abs_bits >= 0x42b17218u && x > 8.8721679688e+01f) {
      return std::numeric_limits<float>::infinity();  // overflow
    }
  }
  float r = x, c = 0.0f;
  int32_t k = 0;
  if (abs_bits > 0x3eb17218u) {  // |x| > ln2 / 2
    const Reduced reduced = Reduce(x);
    r = reduced.r;
    c = reduced.c;
    k = reduced.k;
  } else if (abs_bits < 0x33000000u) {  // |x| < 2^-25
    return x;
  }
  const float hfx = 0.5f * r;
  const float hxs = r * hfx;
  const float r1 =
      1.0f +
      hxs *
          (kQ[0] + hxs * (kQ[1] + hxs * (kQ[2] + hxs * (kQ[3] + hxs * kQ[4]))));
  const float t = 3.0f - r1 * hfx;
  const float e = hxs * ((r1 - t) / (6.0f - r * t));
  if (k == 0) return r - (r * e - hxs);
  return ScaleBack(r, c, k, hxs, e);
}

float PortableTanh(float x) {
  const uint32_t bits = Bits(x);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  const bool negative = (bits >> 31) != 0;
  if (abs_bits >= 0x7f800000u) {  // +-inf: +-1; NaN: NaN
    return abs_bits == 0x7f800000u ? (negative ? -1.0f : 1.0f) : x + x;
  }
  float z;
  if (abs_bits >= 0x41b00000u) {  // |x| >= 22
    z = 1.0f;
  } else if (abs_bits == 0) {
    return x;
  } else if (abs_bits < 0x24000000u) {  // |x| < 2^-55
    return x * (1.0f + x);
  } else {
    const float abs_x = FromBits(abs_bits);
    if (abs_bits >= 0x3f800000u) {  // |x| >= 1
      const float t = PortableExpm1(2.0f * abs_x);
      z = 1.0f - 2.0f / (t + 2.0f);
    } else {
      const float t = PortableExpm1(-2.0f * abs_x);
      z = -t / (t + 2.0f);
    }
  }
  return negative ? -z : z;
}

}  // namespace kvault
