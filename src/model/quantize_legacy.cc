// Q4_1, Q5_0 and Q5_1 row quantizers: the same arithmetic, in the same
// order, as ggml's quantize_row_q4_1_ref / q5_0_ref / q5_1_ref (see
// quantize_rows.h for the layouts).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "model/quantize_common.h"
#include "model/quantize_rows.h"

namespace kvault {
namespace {

using quant_internal::CheckBlocks;
using quant_internal::StoreHalf;

constexpr size_t kBlock = 32;
constexpr size_t kHalf = kBlock / 2;

// The smallest and largest value of a block.
void MinMax(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (size_t j = 0; j < kBlock; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// The value of largest magnitude of a block, sign kept.
float SignedAbsMax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (size_t j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Packs the low nibbles of 32 5-bit codes into qs and the fifth bits into
// the little-endian word qh (value j -> bit j).
void PackFiveBit(const uint8_t* codes, std::byte* qh, std::byte* qs) {
  uint32_t high = 0;
  for (size_t j = 0; j < kHalf; ++j) {
    const uint8_t c0 = codes[j];
    const uint8_t c1 = codes[j + kHalf];
    qs[j] = static_cast<std::byte>((c0 & 0x0F) | ((c1 & 0x0F) << 4));
    high |= static_cast<uint32_t>((c0 & 0x10u) >> 4) << j;
    high |= static_cast<uint32_t>((c1 & 0x10u) >> 4) << (j + kHalf);
  }
  std::memcpy(qh, &high, 4);
}

}  // namespace

void QuantizeRowQ4_1(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kBlock, 20);
  for (size_t b = 0; b < nb; ++b) {
    const float* x = src.data() + b * kBlock;
    std::byte* y = dst.data() + b * 20;
    float min;
    float max;
    MinMax(x, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(d, y);
    StoreHalf(min, y + 2);
    for (size_t j = 0; j < kHalf; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + kHalf] - min) * id;
      const auto q0 = std::min<uint8_t>(
          15, static_cast<uint8_t>(static_cast<int8_t>(x0 + 0.5f)));
      const auto q1 = std::min<uint8_t>(
          15, static_cast<uint8_t>(static_cast<int8_t>(x1 + 0.5f)));
      y[4 + j] = static_cast<std::byte>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ5_0(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kBlock, 22);
  for (size_t b = 0; b < nb; ++b) {
    const float* x = src.data() + b * kBlock;
    std::byte* y = dst.data() + b * 22;
    const float d = SignedAbsMax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(d, y);
    uint8_t codes[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      // x * id lies in [-16, 16], so the +16.5 sum is in [0.5, 32.5].
      codes[j] = std::min<uint8_t>(
          31, static_cast<uint8_t>(static_cast<int8_t>(x[j] * id + 16.5f)));
    }
    PackFiveBit(codes, y + 2, y + 6);
  }
}

void QuantizeRowQ5_1(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kBlock, 24);
  for (size_t b = 0; b < nb; ++b) {
    const float* x = src.data() + b * kBlock;
    std::byte* y = dst.data() + b * 24;
    float min;
    float max;
    MinMax(x, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(d, y);
    StoreHalf(min, y + 2);
    uint8_t codes[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      codes[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    }
    PackFiveBit(codes, y + 4, y + 8);
  }
}

}  // namespace kvault
