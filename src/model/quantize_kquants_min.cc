// Q4_K and Q5_K row quantizers (256-value super-blocks of eight 32-value
// groups, each with a 6-bit scale and a 6-bit min): ggml's
// quantize_row_q4_K_ref / q5_K_ref, the same float operations in the same
// order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quantize_common.h"
#include "model/quantize_kquants_fit.h"
#include "model/quantize_rows.h"

namespace kvault {
namespace {

using quant_internal::CheckBlocks;
using quant_internal::FitWithMin;
using quant_internal::LoadHalf;
using quant_internal::NearestInt;
using quant_internal::StoreHalf;

constexpr int kQK = 256;
constexpr int kGroups = kQK / 32;

struct MinFitParams {
  int nmax;  // 15 for Q4_K, 31 for Q5_K
  float rmin;
  float rdelta;
  int nstep;
};

// Packs the 6-bit scales and mins of the eight groups into 12 bytes.
void PackScaleMins(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  for (int j = 0; j < kGroups; ++j) {
    if (j < 4) {
      q[j] = ls[j];
      q[j + 4] = lm[j];
    } else {
      q[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Group j's 6-bit scale and min from the packed bytes.
void ScaleMin(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Fits one super-block: writes d, dmin (f16) at y, y + 2, the packed
// scales at y + 4 and the codes (0..nmax) of the 256 values to L.
void FitSuperBlock(const float* x, const MinFitParams& p, std::byte* y,
                   uint8_t* L) {
  float weights[32];
  float mins[kGroups];
  float scales[kGroups];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kGroups; ++j) {
    const float* xg = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xg[l]);
    scales[j] = FitWithMin(32, p.nmax, xg, weights, L + 32 * j, &mins[j],
                           p.rmin, p.rdelta, p.nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[kGroups];
  uint8_t lm[kGroups];
  for (int j = 0; j < kGroups; ++j) {
    ls[j] = std::min<uint8_t>(
        63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(
        63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
  }
  uint8_t packed[12] = {};
  PackScaleMins(ls, lm, packed);
  std::memcpy(y + 4, packed, 12);
  StoreHalf(max_scale / 63.0f, y);
  StoreHalf(max_min / 63.0f, y + 2);
  const float d_all = LoadHalf(y);
  const float m_all = LoadHalf(y + 2);
  for (int j = 0; j < kGroups; ++j) {
    uint8_t sc;
    uint8_t m;
    ScaleMin(j, packed, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = m_all * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(p.nmax, l)));
    }
  }
}

// Q4_K layout: d @0, dmin @2, scales[12] @4, qs[128] @16.
void QuantizeBlockQ4_K(const float* x, std::byte* y) {
  uint8_t L[kQK];
  FitSuperBlock(x, {15, -1.0f, 0.1f, 20}, y, L);
  std::byte* q = y + 16;
  for (int j = 0; j < kQK; j += 64) {
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<std::byte>(L[j + l] | (L[j + l + 32] << 4));
    }
    q += 32;
  }
}

// Q5_K layout: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48.
void QuantizeBlockQ5_K(const float* x, std::byte* y) {
  uint8_t L[kQK];
  FitSuperBlock(x, {31, -0.5f, 0.1f, 15}, y, L);
  uint8_t qh[32] = {};
  std::byte* ql = y + 48;
  uint8_t m1 = 1;
  uint8_t m2 = 2;
  for (int n = 0; n < kQK; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<std::byte>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
  std::memcpy(y + 16, qh, 32);
}

}  // namespace

void QuantizeRowQ4_K(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kQK, 144);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockQ4_K(src.data() + i * kQK, dst.data() + i * 144);
  }
}

void QuantizeRowQ5_K(std::span<const float> src, std::span<std::byte> dst) {
  const size_t nb = CheckBlocks(src, dst.size(), kQK, 176);
  for (size_t i = 0; i < nb; ++i) {
    QuantizeBlockQ5_K(src.data() + i * kQK, dst.data() + i * 176);
  }
}

}  // namespace kvault
