#include "model/ggml_compat.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/cpu_features.h"
#include "model/ggml_dot.h"
#include "model/kernels/kernels.h"

#ifdef KVAULT_GGML_X86
#include <immintrin.h>
#endif

// ggml's element-wise float operations (RmsNorm, SwiGlu); the matrix
// products are in ggml_matmul.cc. Every fused operation below is an
// explicit std::fma or intrinsic.
namespace kvault::ggml_compat {
namespace {

// ggml_v_expf for one value: a degree-5 polynomial on a reduced argument,
// scaled by 2^n built in the exponent bits.
float VExpf(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));
  const float u = b * b;
  const float j =
      std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                        std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
               u, 0x1.ffffecp-1f * b);
  const float abs_n = std::fabs(n);
  if (!(abs_n > 126.0f)) return std::fma(k, j, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (abs_n > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

// ggml_v_expf as builds with AVX-512F compile it: the same reduction and
// polynomial, but 1 + p(b) is rounded on its own and scaled by 2^n exactly
// (vscalefps); |n| > 192 gives +inf or 0.
float VExpf512(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) {
    return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
  }
  const float u = b * b;
  const float j =
      std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                        std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
               u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, static_cast<int>(n));
}

#ifdef KVAULT_GGML_X86

// ggml_v_expf on 8 lanes; lanes outside the polynomial's range (|n| > 126,
// rare) take the portable path, which gives the same bits.
KV_GGML_AVX2 __m256 VExpf8(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                       _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n),
                                   _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  if (_mm256_movemask_ps(big) != 0) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, x);
    for (float& v : lanes) v = VExpf(v);
    return _mm256_load_ps(lanes);
  }
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(
      _mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                      _mm256_set1_ps(0x1.573e2ep-5f)),
                      u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                      _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  return _mm256_fmadd_ps(k, j, k);
}

KV_GGML_AVX2 int64_t SwiGlu8Lanes(const float* gate, const float* up, int64_t n,
                                  float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = VExpf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  return i;
}

// ggml_v_expf's AVX-512 form on 16 lanes (see VExpf512). (GCC 12's
// _mm512_scalef_ps passes an undefined merge source: not a real read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
KV_GGML_AVX512 __m512 VExpf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                       _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                      _mm512_set1_ps(0x1.573e2ep-5f)),
                      u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                      _mm512_set1_ps(0x1.fffdb6p-2f))),
      u,
      _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  const __mmask16 big =
      _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (big == 0) return res;
  const __m512 alt = _mm512_mask_blend_ps(
      _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
      _mm512_set1_ps(std::numeric_limits<float>::infinity()),
      _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, res, alt);
}
#pragma GCC diagnostic pop

KV_GGML_AVX512 int64_t SwiGlu16Lanes(const float* gate, const float* up,
                                     int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = VExpf16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  return i;
}

#endif  // KVAULT_GGML_X86

}  // namespace

#ifdef KVAULT_GGML_X86
namespace dot {

int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n,
                   GgmlBuild build, float* out) {
  return build == GgmlBuild::kAvx2 ? SwiGlu8Lanes(gate, up, n, out) : 0;
}

int64_t SwiGluAvx512(const float* gate, const float* up, int64_t n,
                     GgmlBuild build, float* out) {
  return build == GgmlBuild::kAvx512 ? SwiGlu16Lanes(gate, up, n, out)
                                     : SwiGluAvx2(gate, up, n, build, out);
}

}  // namespace dot
#endif  // KVAULT_GGML_X86

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

float VExpf(float x, GgmlBuild build) {
  return build == GgmlBuild::kAvx512 ? VExpf512(x) : VExpf(x);
}

GgmlBuild NativeGgmlBuild() {
  return CpuFeaturesInUse().avx512 ? GgmlBuild::kAvx512 : GgmlBuild::kAvx2;
}

void SwiGlu(const float* gate, const float* up, int64_t n, GgmlBuild build,
            kernels::Isa isa, float* out) {
  const int64_t block = build == GgmlBuild::kAvx512 ? 16 : 8;
  int64_t i = dot::TableFor(isa).ggml_swiglu(gate, up, n, build, out);
  for (; i + block <= n; i += block) {
    for (int64_t j = i; j < i + block; ++j) {
      const float g = gate[j];
      const float e = block == 16 ? VExpf512(0.0f - g) : VExpf(0.0f - g);
      out[j] = (g / (1.0f + e)) * up[j];
    }
  }
  for (; i < n; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

}  // namespace kvault::ggml_compat
