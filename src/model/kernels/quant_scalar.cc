#include "model/kernels/quant_scalar.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/float16.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

float HalfAt(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return HalfToFloat(h);
}

uint8_t ByteAt(const std::byte* p, int64_t i) {
  return std::to_integer<uint8_t>(p[i]);
}

// Round half to even, as ggml's nearest_int and _mm256_round_ps do (the
// default floating-point environment rounds to nearest even). NaN and
// values outside int's range give INT_MIN, the "integer indefinite" that
// x86's conversions (and so the SIMD kernels) produce; a plain cast would
// be undefined there.
int RoundEven(float v) {
  const float r = std::nearbyint(v);
  if (!(r >= -2147483648.0f && r < 2147483648.0f)) {
    return std::numeric_limits<int>::min();
  }
  return static_cast<int>(r);
}

// Nibble pairs: value j in the low nibble of byte j, j + 16 in the high.
void Nibbles(const std::byte* qs, int8_t out[32]) {
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<int8_t>(ByteAt(qs, j) & 0x0F);
    out[j + 16] = static_cast<int8_t>(ByteAt(qs, j) >> 4);
  }
}

// Adds the fifth bits of Q5_0/Q5_1 (bit j of the u32 for value j).
void AddFifthBits(const std::byte* qh_bytes, int8_t q[32]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(q[j] | (((qh >> j) & 1) << 4));
  }
}

void UnpackQ2K(const std::byte* blk, UnpackedK* u) {
  using namespace q2_k;
  const std::byte* qs = blk + kQs;
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        u->q[128 * n + 32 * j + l] =
            static_cast<int8_t>((ByteAt(qs, 32 * n + l) >> (2 * j)) & 3);
      }
    }
  }
  for (int g = 0; g < 16; ++g) {
    u->scale[g] = ByteAt(blk + kScales, g) & 0x0F;
    u->min[g] = ByteAt(blk + kScales, g) >> 4;
  }
  u->d = HalfAt(blk + kD);
  u->dmin = HalfAt(blk + kDmin);
}

void UnpackQ3K(const std::byte* blk, UnpackedK* u) {
  using namespace q3_k;
  const std::byte* qs = blk + kQs;
  const std::byte* hm = blk + kHmask;
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      const int bit = 4 * n + j;
      for (int l = 0; l < 32; ++l) {
        const int low = (ByteAt(qs, 32 * n + l) >> (2 * j)) & 3;
        const int high = (ByteAt(hm, l) >> bit) & 1;
        u->q[128 * n + 32 * j + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
  int8_t scales[16];
  UnpackQ3KScales(reinterpret_cast<const uint8_t*>(blk + kScales), scales);
  for (int g = 0; g < 16; ++g) {
    u->scale[g] = scales[g];
    u->min[g] = 0;
  }
  u->d = HalfAt(blk + kD);
  u->dmin = 0.0f;
}

// Q4_K and Q5_K: 64-value chunks, low nibbles then high nibbles, each 32
// values with their own 6-bit scale and min; Q5_K adds bit 2c (low) or
// 2c + 1 (high) of qh[l] as the fifth bit of chunk c.
void UnpackQ45K(const std::byte* blk, const std::byte* qs, const std::byte* qh,
                UnpackedK* u) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int v = ByteAt(qs, 32 * c + l);
      int lo = v & 0x0F;
      int hi = v >> 4;
      if (qh != nullptr) {
        lo |= ((ByteAt(qh, l) >> (2 * c)) & 1) << 4;
        hi |= ((ByteAt(qh, l) >> (2 * c + 1)) & 1) << 4;
      }
      u->q[64 * c + l] = static_cast<int8_t>(lo);
      u->q[64 * c + 32 + l] = static_cast<int8_t>(hi);
    }
  }
  uint8_t scales[8], mins[8];
  UnpackQ4KScales(reinterpret_cast<const uint8_t*>(blk + q4_k::kScales), scales,
                  mins);
  for (int g = 0; g < 16; ++g) {
    u->scale[g] = scales[g / 2];
    u->min[g] = mins[g / 2];
  }
  u->d = HalfAt(blk + q4_k::kD);
  u->dmin = HalfAt(blk + q4_k::kDmin);
}

void UnpackQ6K(const std::byte* blk, UnpackedK* u) {
  using namespace q6_k;
  for (int n = 0; n < 2; ++n) {
    const std::byte* ql = blk + kQl + 64 * n;
    const std::byte* qh = blk + kQh + 32 * n;
    int8_t* q = u->q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      const int h = ByteAt(qh, l);
      q[l] = static_cast<int8_t>(((ByteAt(ql, l) & 0xF) | ((h & 3) << 4)) - 32);
      q[l + 32] = static_cast<int8_t>(
          ((ByteAt(ql, l + 32) & 0xF) | (((h >> 2) & 3) << 4)) - 32);
      q[l + 64] = static_cast<int8_t>(
          ((ByteAt(ql, l) >> 4) | (((h >> 4) & 3) << 4)) - 32);
      q[l + 96] = static_cast<int8_t>(
          ((ByteAt(ql, l + 32) >> 4) | (((h >> 6) & 3) << 4)) - 32);
    }
  }
  for (int g = 0; g < 16; ++g) {
    u->scale[g] = static_cast<int8_t>(ByteAt(blk + kScales, g));
    u->min[g] = 0;
  }
  u->d = HalfAt(blk + kD);
  u->dmin = 0.0f;
}

void UnpackIq4xs(const std::byte* blk, UnpackedK* u) {
  using namespace iq4_xs;
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + kScalesH, sizeof(scales_h));
  for (int ib = 0; ib < 8; ++ib) {
    const int low = (ByteAt(blk + kScalesL, ib / 2) >> (4 * (ib % 2))) & 0xF;
    const int ls = low | (((scales_h >> (2 * ib)) & 3) << 4);
    u->scale[2 * ib] = u->scale[2 * ib + 1] = static_cast<int16_t>(ls - 32);
    u->min[2 * ib] = u->min[2 * ib + 1] = 0;
    int8_t idx[32];
    Nibbles(blk + kQs + 16 * ib, idx);
    for (int j = 0; j < 32; ++j) u->q[32 * ib + j] = kIq4nlValues[idx[j]];
  }
  u->d = HalfAt(blk + kD);
  u->dmin = 0.0f;
}

// sum_i q[i] * x[i] over n int8 values.
int32_t DotI8(const int8_t* q, const int8_t* x, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += q[i] * x[i];
  return sum;
}

const int8_t* Int8At(const std::byte* p) {
  return reinterpret_cast<const int8_t*>(p);
}

// ggml's 8-lane horizontal sum: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) +
// (a3 + a7)).
float HSum8(const float* a) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5];
  const float s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

// Weights of a 32-value type against Q8_0 or Q8_1 (kQ8_1), in the float
// order of llama.cpp's x86 vec_dot (bit for bit, checked against its
// library): per block, 8 int32 lanes of 4 consecutive products each, and
// acc[l] = fma(dw * dx, lane, acc[l]). The min term of Q4_1/Q5_1 goes into
// a scalar, summs = summs + m * s (two roundings), added after the
// horizontal sum.
template <Block32Type kType, int kBytes, bool kQ8_1>
float Dot32(const std::byte* w, const std::byte* x, int64_t n) {
  constexpr int kXBytes = kQ8_1 ? q8_1::kBytes : 34;
  constexpr int kXQs = kQ8_1 ? q8_1::kQs : 2;
  float acc[8] = {};
  float summs = 0.0f;
  Unpacked32 u;
  for (int64_t b = 0; b < n / kBlock32; ++b) {
    const std::byte* xb = x + b * kXBytes;
    UnpackBlock32(kType, w + b * kBytes, &u);
    const int8_t* xq = Int8At(xb + kXQs);
    const float dd = u.d * HalfAt(xb);
    for (int l = 0; l < 8; ++l) {
      acc[l] = std::fma(
          dd, static_cast<float>(DotI8(u.q + 4 * l, xq + 4 * l, 4)), acc[l]);
    }
    if constexpr (kQ8_1) {
      const float ms = u.m * HalfAt(xb + q8_1::kS);
      summs = summs + ms;
    }
  }
  if constexpr (kQ8_1) return HSum8(acc) + summs;
  return HSum8(acc);
}

// IQ4_NL against Q8_0 as llama.cpp's repacked IQ4_NL GEMV and GEMM sum it
// (the same order in both): acc = fma(block's integer sum, dw * dx, acc),
// block after block.
float DotIq4nlSequential(const std::byte* w, const std::byte* x, int64_t n) {
  float acc = 0.0f;
  Unpacked32 u;
  for (int64_t b = 0; b < n / kBlock32; ++b) {
    const std::byte* xb = x + b * 34;
    UnpackBlock32(Block32Type::kIQ4_NL, w + b * iq4_nl::kBytes, &u);
    const float dd = u.d * HalfAt(xb);
    acc = std::fma(static_cast<float>(DotI8(u.q, Int8At(xb + 2), 32)), dd, acc);
  }
  return acc;
}

// Q4_K / Q2_K against Q8_K as llama.cpp's repacked kernels sum them (read
// from its machine code; bit for bit on every row of the st260K-x4 files):
// per `step` values (256 in its GEMV; 64 for Q4_K and 128 for Q2_K in its
// GEMM) the exact integer sums of scale * (q . x) and of min * bsum, then
// acc = fma(isum, d * dx, acc) and accm = fma(imin, dmin * dx, accm);
// the result is acc - accm.
template <BlockKType kType, int kBytes>
float DotKStepped(const std::byte* w, const std::byte* x, int64_t n, int step) {
  float acc = 0.0f;
  float accm = 0.0f;
  UnpackedK u;
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const std::byte* xb = x + b * q8_k::kBytes;
    UnpackBlockK(kType, w + b * kBytes, &u);
    const int8_t* xq = Int8At(xb + q8_k::kQs);
    float xd;
    std::memcpy(&xd, xb + q8_k::kD, sizeof(xd));
    const float dd = u.d * xd;
    const float dm = u.dmin * xd;
    for (int g0 = 0; g0 < 16; g0 += step / 16) {
      int32_t isum = 0;
      int32_t imin = 0;
      for (int g = g0; g < g0 + step / 16; ++g) {
        isum += u.scale[g] * DotI8(u.q + 16 * g, xq + 16 * g, 16);
        int16_t bsum;
        std::memcpy(&bsum, xb + q8_k::kBsums + 2 * g, sizeof(bsum));
        imin += u.min[g] * bsum;
      }
      acc = std::fma(static_cast<float>(isum), dd, acc);
      accm = std::fma(static_cast<float>(imin), dm, accm);
    }
  }
  return acc - accm;
}

// K-quant weights against Q8_K in the float order of llama.cpp b10573's
// x86 vec_dot (read from its machine code; bit for bit on every row of the
// st260K-x4 files): per super-block, 8 exact int32 lanes, lane m holding
// values 4m .. 4m + 3 of every 32-value chunk times their scales, then
// acc[m] = fma(d * dx, lane, acc[m]), and an 8-lane horizontal sum.
//  - Q3_K, IQ4_XS: signed values, nothing else in the lanes.
//  - Q6_K: unsigned values (q + 32), and lane m subtracts the offset of
//    chunk m: 32 * (s[2m] * bsum[2m] + s[2m + 1] * bsum[2m + 1]).
//  - Q5_K: unsigned values; the mins go into a scalar, summs = fma(-dx *
//    dmin, sum of min * bsum, summs), added after the horizontal sum.
template <BlockKType kType, int kBytes>
float DotKLanes8(const std::byte* w, const std::byte* x, int64_t n) {
  float acc[8] = {};
  float summs = 0.0f;
  UnpackedK u;
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const std::byte* xb = x + b * q8_k::kBytes;
    UnpackBlockK(kType, w + b * kBytes, &u);
    const int8_t* xq = Int8At(xb + q8_k::kQs);
    int16_t bsums[16];
    std::memcpy(bsums, xb + q8_k::kBsums, sizeof(bsums));
    int32_t lane[8] = {};
    for (int i = 0; i < kBlockK; ++i) {
      const int q = kType == BlockKType::kQ6_K ? u.q[i] + 32 : u.q[i];
      lane[(i % 32) / 4] += u.scale[i / 16] * (q * xq[i]);
    }
    if constexpr (kType == BlockKType::kQ6_K) {
      for (int m = 0; m < 8; ++m) {
        lane[m] -= 32 * (u.scale[2 * m] * bsums[2 * m] +
                         u.scale[2 * m + 1] * bsums[2 * m + 1]);
      }
    }
    float xd;
    std::memcpy(&xd, xb + q8_k::kD, sizeof(xd));
    const float dd = u.d * xd;
    for (int m = 0; m < 8; ++m) {
      acc[m] = std::fma(dd, static_cast<float>(lane[m]), acc[m]);
    }
    if constexpr (kType == BlockKType::kQ5_K) {
      int32_t mins = 0;
      for (int g = 0; g < 16; ++g) mins += u.min[g] * bsums[g];
      summs = std::fma(-xd * u.dmin, static_cast<float>(mins), summs);
    }
  }
  if constexpr (kType == BlockKType::kQ5_K) return HSum8(acc) + summs;
  return HSum8(acc);
}

}  // namespace

void UnpackQ4KScales(const uint8_t* q, uint8_t scales[8], uint8_t mins[8]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = q[j] & 63;
    mins[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    mins[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void UnpackQ3KScales(const uint8_t* q, int8_t scales[16]) {
  // Bytes 0-7 hold the low nibbles (scales 0-7 low, 8-15 high nibble);
  // bytes 8-11 hold the top two bits, four scales per byte.
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
    const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

void UnpackBlock32(Block32Type type, const std::byte* blk, Unpacked32* u) {
  u->m = 0.0f;
  u->d = HalfAt(blk);
  switch (type) {
    case Block32Type::kQ4_0:
      Nibbles(blk + 2, u->q);
      for (int8_t& v : u->q) v = static_cast<int8_t>(v - 8);
      return;
    case Block32Type::kQ4_1:
      Nibbles(blk + q4_1::kQs, u->q);
      u->m = HalfAt(blk + q4_1::kM);
      return;
    case Block32Type::kQ5_0:
      Nibbles(blk + q5_0::kQs, u->q);
      AddFifthBits(blk + q5_0::kQh, u->q);
      for (int8_t& v : u->q) v = static_cast<int8_t>(v - 16);
      return;
    case Block32Type::kQ5_1:
      Nibbles(blk + q5_1::kQs, u->q);
      AddFifthBits(blk + q5_1::kQh, u->q);
      u->m = HalfAt(blk + q5_1::kM);
      return;
    case Block32Type::kQ8_0:
      std::memcpy(u->q, blk + 2, 32);
      return;
    case Block32Type::kIQ4_NL: {
      int8_t idx[32];
      Nibbles(blk + iq4_nl::kQs, idx);
      for (int j = 0; j < 32; ++j) u->q[j] = kIq4nlValues[idx[j]];
      return;
    }
  }
}

void UnpackBlockK(BlockKType type, const std::byte* blk, UnpackedK* u) {
  switch (type) {
    case BlockKType::kQ2_K:
      return UnpackQ2K(blk, u);
    case BlockKType::kQ3_K:
      return UnpackQ3K(blk, u);
    case BlockKType::kQ4_K:
      return UnpackQ45K(blk, blk + q4_k::kQs, nullptr, u);
    case BlockKType::kQ5_K:
      return UnpackQ45K(blk, blk + q5_k::kQs, blk + q5_k::kQh, u);
    case BlockKType::kQ6_K:
      return UnpackQ6K(blk, u);
    case BlockKType::kIQ4_XS:
      return UnpackIq4xs(blk, u);
  }
}

void QuantizeRowQ8_0Act(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    std::byte* y = out + b * 34;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax < a ? a : amax;  // keeps amax when a is NaN
    }
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      float v = x[j] * id;
      v = std::isnan(v) ? 0.0f : std::fmin(std::fmax(v, -127.0f), 127.0f);
      y[2 + j] = static_cast<std::byte>(static_cast<int8_t>(RoundEven(v)));
    }
    const uint16_t dh = FloatToHalf(d);
    std::memcpy(y, &dh, sizeof(dh));
  }
}

void QuantizeRowQ8_1(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlock32; ++b, x += kBlock32) {
    std::byte* y = out + b * q8_1::kBytes;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = RoundEven(x[j] * id);
      y[q8_1::kQs + j] = static_cast<std::byte>(static_cast<int8_t>(q));
      sum += q;
    }
    const uint16_t dh = FloatToHalf(d);
    const uint16_t sh = FloatToHalf(d * static_cast<float>(sum));
    std::memcpy(y + q8_1::kD, &dh, 2);
    std::memcpy(y + q8_1::kS, &sh, 2);
  }
}

void QuantizeRowQ8_K(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlockK; ++b, x += kBlockK) {
    std::byte* y = out + b * q8_k::kBytes;
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kBlockK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    std::memset(y, 0, q8_k::kBytes);
    if (amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    int8_t* q = reinterpret_cast<int8_t*>(y + q8_k::kQs);
    for (int j = 0; j < kBlockK; ++j) {
      const int v = RoundEven(iscale * x[j]);
      q[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int16_t s = 0;
      for (int i = 0; i < 16; ++i) s = static_cast<int16_t>(s + q[16 * g + i]);
      std::memcpy(y + q8_k::kBsums + 2 * g, &s, sizeof(s));
    }
    const float d = 1.0f / iscale;
    std::memcpy(y + q8_k::kD, &d, sizeof(d));
  }
}

float DotQ8_0Q8_0(const std::byte* w, const std::byte* x, int64_t n) {
  return Dot32<Block32Type::kQ8_0, 34, false>(w, x, n);
}
float DotQ4_1Q8_1(const std::byte* w, const std::byte* x, int64_t n) {
  return Dot32<Block32Type::kQ4_1, q4_1::kBytes, true>(w, x, n);
}
float DotQ5_0Q8_0(const std::byte* w, const std::byte* x, int64_t n) {
  return Dot32<Block32Type::kQ5_0, q5_0::kBytes, false>(w, x, n);
}
float DotQ5_1Q8_1(const std::byte* w, const std::byte* x, int64_t n) {
  return Dot32<Block32Type::kQ5_1, q5_1::kBytes, true>(w, x, n);
}
float DotIq4nlQ8_0(const std::byte* w, const std::byte* x, int64_t n) {
  return DotIq4nlSequential(w, x, n);
}
float DotQ2KQ8K(const std::byte* w, const std::byte* x, int64_t n,
                DotOrder order) {
  return DotKStepped<BlockKType::kQ2_K, q2_k::kBytes>(
      w, x, n, order == DotOrder::kGemm ? 128 : 256);
}
float DotQ3KQ8K(const std::byte* w, const std::byte* x, int64_t n) {
  return DotKLanes8<BlockKType::kQ3_K, q3_k::kBytes>(w, x, n);
}
float DotQ4KQ8K(const std::byte* w, const std::byte* x, int64_t n,
                DotOrder order) {
  return DotKStepped<BlockKType::kQ4_K, q4_k::kBytes>(
      w, x, n, order == DotOrder::kGemm ? 64 : 256);
}
float DotQ5KQ8K(const std::byte* w, const std::byte* x, int64_t n) {
  return DotKLanes8<BlockKType::kQ5_K, q5_k::kBytes>(w, x, n);
}
float DotQ6KQ8K(const std::byte* w, const std::byte* x, int64_t n) {
  return DotKLanes8<BlockKType::kQ6_K, q6_k::kBytes>(w, x, n);
}
float DotIq4xsQ8K(const std::byte* w, const std::byte* x, int64_t n) {
  return DotKLanes8<BlockKType::kIQ4_XS, iq4_xs::kBytes>(w, x, n);
}

}  // namespace kvault::kernels
