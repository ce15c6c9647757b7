#include "model/quantize_kquants_fit.h"

#include <algorithm>
#include <cmath>

#include "model/quantize_common.h"

namespace kvault::quant_internal {
namespace {

// The value of largest magnitude, sign kept (0 when all are 0); *amax gets
// its magnitude.
float SignedMax(int n, const float* x, float* amax) {
  float max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

int ClampSym(int l, int nmax) { return std::max(-nmax, std::min(nmax - 1, l)); }

// Sum of w * x * l and w * l * l over the codes of `iscale`.
void SymmetricSums(int n, int nmax, const float* x, const float* qw,
                   float iscale, float* sumlx, float* suml2) {
  *sumlx = 0.0f;
  *suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = ClampSym(NearestInt(iscale * x[i]), nmax);
    const float w = qw != nullptr ? qw[i] : x[i] * x[i];
    *sumlx += w * x[i] * static_cast<float>(l);
    *suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
}

void SetSymmetricCodes(int n, int nmax, const float* x, float iscale,
                       int8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] =
        static_cast<int8_t>(nmax + ClampSym(NearestInt(iscale * x[i]), nmax));
  }
}

}  // namespace

float FitSymmetric(int n, int nmax, const float* x, int8_t* L,
                   const float* qw) {
  float amax;
  const float max = SignedMax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float nmax_f = static_cast<float>(nmax);
  float iscale = -nmax_f / max;
  float sumlx;
  float suml2;
  SymmetricSums(n, nmax, x, qw, iscale, &sumlx, &suml2);
  SetSymmetricCodes(n, nmax, x, iscale, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax_f + 0.1f * static_cast<float>(is)) / max;
    SymmetricSums(n, nmax, x, qw, iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      SetSymmetricCodes(n, nmax, x, iscale, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float FitSymmetricGreedy(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = SignedMax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = ClampSym(NearestInt(iscale * x[i]), nmax);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = ClampSym(NearestInt(x[i] * sl2 / slx), nmax);
      if (new_l == L[i]) continue;
      const float nl = static_cast<float>(new_l);
      slx += w * x[i] * nl;
      sl2 += w * nl * nl;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// Weighted error of scale * L + min against x.
float MinFitError(int n, const float* x, const float* weights, const uint8_t* L,
                  float scale, float min, bool use_mad) {
  float error = 0.0f;
  for (int i = 0; i < n; ++i) {
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    error += weights[i] * diff;
  }
  return error;
}

int ClampUnsigned(int l, int nmax) { return std::max(0, std::min(nmax, l)); }

}  // namespace

float FitWithMin(int n, int nmax, const float* x, const float* weights,
                 uint8_t* L, float* the_min, float rmin, float rdelta,
                 int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float nmax_f = static_cast<float>(nmax);
  float iscale = nmax_f / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(
        ClampUnsigned(NearestInt(iscale * (x[i] - min)), nmax));
  }
  float best_error = MinFitError(n, x, weights, L, scale, min, use_mad);
  uint8_t aux[32];
  KV_CHECK(n <= 32);
  for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + nmax_f) / (max - min);
    float sum_l = 0;
    float sum_l2 = 0;
    float sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = ClampUnsigned(NearestInt(iscale * (x[i] - min)), nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float error =
        MinFitError(n, x, weights, aux, this_scale, this_min, use_mad);
    if (error < best_error) {
      std::copy(aux, aux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

}  // namespace kvault::quant_internal
