// Q2_K, Q3_K and Q6_K row quantizers (256-value super-blocks of 16-value
// groups): ggml's quantize_row_q2_K_ref / q3_K_ref / q6_K_ref, the same
// float operations in the same order. Q4_K / Q5_K: quantize_kquants_min.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quantize_common.h"
#include "model/quantize_kquants_fit.h"
#include "model/quantize_rows.h"

namespace kvault {
namespace {

using quant_internal::CheckBlocks;
using quant_internal::FitSymmetric;
using quant_internal::FitSymmetricGreedy;
using quant_internal::FitWithMin;
using quant_internal::kGroupMaxEps;
using quant_internal::LoadHalf;
using quant_internal::NearestInt;
using quant_internal::StoreHalf;

constexpr int kQK = 256;
constexpr int kGroups = kQK / 16;

// Packs 256 2-bit codes: byte j/4 + l of each 128-value half holds values
// l, l + 32, l + 64, l + 96 in bits 0-1, 2-3, 4-5, 6-7.
void PackTwoBit(const uint8_t* L, std::byte* qs) {
  for (int j = 0; j < kQK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] =
          static_cast<std::byte>(L[j + l] | (L[j + l + 32] << 2) |
                                 (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Q2_K layout: scales[16] @0, qs[64] @16, d @80, dmin @82.
void QuantizeBlockQ2_K(const float* x, std::byte* y) {
  uint8_t L[kQK];
  float weights[16];
  float mins[kGroups];
  float scales[kGroups];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kGroups; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = FitWithMin(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j],
                           -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  uint8_t sc[kGroups] = {};
  constexpr float kQ4Scale = 15.0f;
  if (max_scale > 0) {
    const float iscale = kQ4Scale / max_scale;
    for (int j = 0; j < kGroups; ++j) {
      sc[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
    }
  }
  StoreHalf(max_scale > 0 ? max_scale / kQ4Scale : 0.0f, y + 80);
  if (max_min > 0) {
    const float iscale = kQ4Scale / max_min;
    for (int j = 0; j < kGroups; ++j) {
      sc[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
    }
  }
  StoreHalf(max_min > 0 ? max_min / kQ4Scale : 0.0f, y + 82);
  const float d_all = LoadHalf(y + 80);
  const float m_all = LoadHalf(y + 82);
  for (int j = 0; j < kGroups; ++j) {
    const float d = d_all * static_cast<float>(sc[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = m_all * static_cast<float>(sc[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt((x[16 * j + ii] + dm) / d);
      L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
    }
  }
  std::memcpy(y, sc, kGroups);
  PackTwoBit(L, y + 16);
}

// Packs 16 6-bit Q3_K scales (already offset by 32) into 12 bytes.
void PackQ3Scales(const int* ls, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < kGroups; ++j) {
    const int l = ls[j];
    if (j < 8) {
      scales[j] = static_cast<uint8_t>(l & 0xF);
    } else {
      scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
    }
    scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
}

// Returns Q3_K group j's signed scale from the packed scales.
int Q3Scale(const uint8_t* scales, int j) {
  int sc = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return (sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// Q3_K layout: hmask[32] @0, qs[64] @32, scales[12] @96, d @108.
void QuantizeBlockQ3_K(const float* x, std::byte* y) {
  int8_t L[kQK];
  float scales[kGroups];
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < kGroups; ++j) {
    scales[j] = FitSymmetricGreedy(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  uint8_t packed[12] = {};
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    int ls[kGroups];
    for (int j = 0; j < kGroups; ++j) {
      const auto l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
      ls[j] = std::max<int>(-32, std::min<int>(31, l)) + 32;
    }
    PackQ3Scales(ls, packed);
    StoreHalf(1 / iscale, y + 108);
  } else {
    StoreHalf(0.0f, y + 108);
  }
  std::memcpy(y + 96, packed, 12);
  const float d_all = LoadHalf(y + 108);
  for (int j = 0; j < kGroups; ++j) {
    const float d = d_all * static_cast<float>(Q3Scale(packed, j));
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt(x[16 * j + ii] / d);
      L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
    }
  }
  uint8_t hmask[kQK / 8] = {};
  uint8_t codes[kQK];
  for (int j = 0; j < kQK; ++j) {
    codes[j] = static_cast<uint8_t>(L[j]);
    if (codes[j] > 3) {
      hmask[j % (kQK / 8)] |= static_cast<uint8_t>(1 << (j / (kQK / 8)));
      codes[j] -= 4;
    }
  }
  std::memcpy(y, hmask, sizeof(hmask));
  PackTwoBit(codes, y + 32);
}

// Q6_K layout: ql[128] @0, qh[64] @128, int8 scales[16] @192, d @208.
void QuantizeBlockQ6_K(const float* x, std::byte* y) {
  int8_t L[kQK];
  float scales[kGroups];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < kGroups; ++ib) {
    scales[ib] = FitSymmetric(16, 32, x + 16 * ib, L + 16 * ib, nullptr);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, 210);
    return;
  }
  const float iscale = -128.0f / max_scale;
  StoreHalf(1 / iscale, y + 208);
  int8_t sc[kGroups];
  for (int ib = 0; ib < kGroups; ++ib) {
    sc[ib] =
        static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
  }
  std::memcpy(y + 192, sc, kGroups);
  const float d_all = LoadHalf(y + 208);
  for (int j = 0; j < kGroups; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt(x[16 * j + ii] / d);
      L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
    }
  }
  std::byte* ql = y;
  std::byte* qh = y + 128;
  for (int j = 0; j < kQK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l];
      const int q2 = L[j + l + 32];
      const int q3 = L[j + l + 64];
      const int q4 = L[j + l + 96];
      ql[l] = static_cast<std::byte>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<std::byte>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] = static_cast<std::byte>((q1 >> 4) | ((q2 >> 4) << 2) |
                                     ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace

void QuantizeRowQ2_K(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kQK, 84);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockQ2_K(src.data() + i * kQK, dst.data() + i * 84);
  }
}

void QuantizeRowQ3_K(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kQK, 110);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockQ3_K(src.data() + i * kQK, dst.data() + i * 110);
  }
}

void QuantizeRowQ6_K(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kQK, 210);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockQ6_K(src.data() + i * kQK, dst.data() + i * 210);
  }
}

}  // namespace kvault
