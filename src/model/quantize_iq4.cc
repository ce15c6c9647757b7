// IQ4_NL and IQ4_XS row quantizers: 4-bit indices into the non-linear
// levels kIq4nlValues, with a scale per 32 values. These reproduce what
// llama-quantize writes without an importance matrix, i.e. ggml's
// quantize_iq4_nl / quantize_iq4_xs with no quant weights: per-value
// weights x^2 and 7 scale tries either side (ntry = 7), the same float
// operations in the same order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quantize_common.h"
#include "model/quantize_rows.h"

namespace kvault {
namespace {

using quant_internal::CheckBlocks;
using quant_internal::kGroupMaxEps;
using quant_internal::NearestInt;
using quant_internal::StoreHalf;

constexpr int kGroup = 32;
constexpr int kTries = 7;

// Index of the level nearest to v (ties go up): a branch-free binary search
// on the midpoints, doubled so the comparison is exact.
int NearestLevel(float v) {
  const float v2 = v + v;
  int idx = 0;
  for (int step = 8; step > 0; step >>= 1) {
    const int j = idx + step;
    const float mid2 =
        static_cast<float>(kIq4nlValues[j - 1] + kIq4nlValues[j]);
    idx = v2 >= mid2 ? j : idx;
  }
  return idx;
}

// Weighted sums of the levels chosen at inverse scale `id`.
void LevelSums(const float* x, const float* w, float id, float* sumqx,
               float* sumq2, uint8_t* L) {
  *sumqx = 0;
  *sumq2 = 0;
  for (int j = 0; j < kGroup; ++j) {
    const int l = NearestLevel(id * x[j]);
    if (L != nullptr) L[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(kIq4nlValues[l]);
    *sumqx += w[j] * q * x[j];
    *sumq2 += w[j] * q * q;
  }
}

// Best scale of one 32-value group (0 for an all-zero group); L gets the
// indices of the first try.
float FitGroup(const float* x, uint8_t* L) {
  float weight[kGroup];
  for (int j = 0; j < kGroup; ++j) weight[j] = x[j] * x[j];
  float amax = 0;
  float max = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, kGroup);
    return 0.0f;
  }
  const float values0 = static_cast<float>(kIq4nlValues[0]);
  float d = -max / values0;
  float sumqx;
  float sumq2;
  LevelSums(x, weight, 1 / d, &sumqx, &sumq2, L);
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    const float id = static_cast<float>(itry + kIq4nlValues[0]) / max;
    LevelSums(x, weight, id, &sumqx, &sumq2, nullptr);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Packs 32 indices per 16 bytes: value j low nibble, j + 16 high.
void PackNibbles(const uint8_t* L, int n, std::byte* q4) {
  for (int i = 0; i < n / 32; ++i) {
    for (int j = 0; j < 16; ++j) {
      q4[16 * i + j] =
          static_cast<std::byte>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
  }
}

// IQ4_NL layout: d @0, qs[16] @2.
void QuantizeBlockIQ4_NL(const float* x, std::byte* y) {
  uint8_t L[kGroup];
  const float scale = FitGroup(x, L);
  StoreHalf(scale, y);
  const float id = scale != 0.0f ? 1 / scale : 0.0f;
  for (int j = 0; j < kGroup; ++j) {
    L[j] = static_cast<uint8_t>(NearestLevel(id * x[j]));
  }
  PackNibbles(L, kGroup, y + 2);
}

// IQ4_XS layout: d @0, u16 scales_h @2, scales_l[4] @4, qs[128] @8.
void QuantizeBlockIQ4_XS(const float* x, std::byte* y) {
  constexpr int kSuper = 256;
  constexpr int kGroups = kSuper / kGroup;
  uint8_t L[kSuper];
  float scales[kGroups];
  float max_scale = 0;
  float amax_scale = 0;
  for (int ib = 0; ib < kGroups; ++ib) {
    scales[ib] = FitGroup(x + ib * kGroup, L + ib * kGroup);
    const float abs_d = std::fabs(scales[ib]);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32;
  StoreHalf(d, y);
  const float id = d != 0.0f ? 1 / d : 0.0f;
  uint16_t scales_h = 0;
  uint8_t scales_l[kGroups / 2] = {};
  for (int ib = 0; ib < kGroups; ++ib) {
    int l = std::max(-32, std::min(31, NearestInt(id * scales[ib])));
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1 / dl : 0.0f;
    for (int j = 0; j < kGroup; ++j) {
      L[ib * kGroup + j] =
          static_cast<uint8_t>(NearestLevel(idl * x[ib * kGroup + j]));
    }
    l += 32;
    const auto l_l = static_cast<uint8_t>(l & 0xF);
    const auto l_h = static_cast<uint16_t>(l >> 4);
    scales_l[ib / 2] |= static_cast<uint8_t>(ib % 2 == 0 ? l_l : l_l << 4);
    scales_h |= static_cast<uint16_t>(l_h << (2 * ib));
  }
  std::memcpy(y + 2, &scales_h, 2);
  std::memcpy(y + 4, scales_l, sizeof(scales_l));
  PackNibbles(L, kSuper, y + 8);
}

}  // namespace

void QuantizeRowIQ4_NL(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kGroup, 18);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockIQ4_NL(src.data() + i * kGroup, dst.data() + i * 18);
  }
}

void QuantizeRowIQ4_XS(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), 256, 136);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockIQ4_XS(src.data() + i * 256, dst.data() + i * 136);
  }
}

}  // namespace kvault
