#include "model/exact_exp.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVAULT_EXACT_EXP_AVX2 1
#endif

namespace kvault {
namespace {

#ifdef KVAULT_EXACT_EXP_AVX2
constexpr int kTableBits = 5;  // glibc's EXP2F_TABLE_BITS
constexpr double kN = 1 << kTableBits;
constexpr double kInvLn2N = 0x1.71547652b82fep+0 * kN;
constexpr double kShift = 0x1.8p+52;  // rounds z to an integer in its bits
constexpr double kC0 = 0x1.c6af84b912394p-5 / kN / kN / kN;
constexpr double kC1 = 0x1.ebfce50fac4f3p-3 / kN / kN;
constexpr double kC2 = 0x1.62e42ff0c52d6p-1 / kN;
// Below this glibc returns 0 (underflow); above 0 no caller needs values
// (softmax arguments are <= 0), so those lanes and NaNs take std::exp.
constexpr float kLowest = -0x1.9fe368p6f;

// T[i] = bits(2^(i/32)) - (i << 47): adding k << 47 puts k / 32's integer
// part into the exponent (glibc's __exp2f_data.tab, recomputed here).
struct Table {
  alignas(64) uint64_t t[1 << kTableBits];
  Table() {
    for (int i = 0; i < (1 << kTableBits); ++i) {
      const double v = static_cast<double>(std::exp2(i / 32.0L));
      uint64_t u;
      std::memcpy(&u, &v, 8);
      t[i] = u - (static_cast<uint64_t>(i) << (52 - kTableBits));
    }
  }
};
const Table kTable;

#define KV_AVX2 __attribute__((target("avx2,fma")))

// exp of 4 values in [kLowest, 0], glibc's operations in its order.
KV_AVX2 inline __m128 Exp4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d z = _mm256_mul_pd(_mm256_set1_pd(kInvLn2N), xd);
  __m256d kd = _mm256_add_pd(z, _mm256_set1_pd(kShift));
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, _mm256_set1_pd(kShift));
  const __m256d r = _mm256_sub_pd(z, kd);
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  __m256i t = _mm256_i64gather_epi64(
      reinterpret_cast<const long long*>(kTable.t), index, 8);
  t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 52 - kTableBits));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d p =
      _mm256_fmadd_pd(_mm256_set1_pd(kC0), r, _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(kC2), r, _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(p, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

KV_AVX2 void ExpAvx2(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 in_range =
        _mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(kLowest), _CMP_GE_OQ),
                      _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LE_OQ));
    const int ok = _mm256_movemask_ps(in_range);
    alignas(32) float in[8];
    if (ok != 0xFF) _mm256_store_ps(in, v);
    _mm256_storeu_ps(x + i, _mm256_set_m128(Exp4(_mm256_extractf128_ps(v, 1)),
                                            Exp4(_mm256_castps256_ps128(v))));
    for (int l = 0; ok != 0xFF && l < 8; ++l) {
      if (!(ok >> l & 1)) x[i + l] = std::exp(in[l]);
    }
  }
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

#define KV_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

// Exp4's operations for 8 values, the table looked up with two-table
// permutes (16 entries each) instead of a gather.
KV_AVX512 inline __m256 Exp8(__m256 x) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d z = _mm512_mul_pd(_mm512_set1_pd(kInvLn2N), xd);
  __m512d kd = _mm512_add_pd(z, _mm512_set1_pd(kShift));
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, _mm512_set1_pd(kShift));
  const __m512d r = _mm512_sub_pd(z, kd);
  const double* t = reinterpret_cast<const double*>(kTable.t);
  const __m512d lo = _mm512_permutex2var_pd(_mm512_load_pd(t), ki,
                                            _mm512_load_pd(t + 8));
  const __m512d hi = _mm512_permutex2var_pd(_mm512_load_pd(t + 16), ki,
                                            _mm512_load_pd(t + 24));
  const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
  __m512i bits = _mm512_castpd_si512(_mm512_mask_blend_pd(upper, lo, hi));
  bits = _mm512_add_epi64(bits, _mm512_slli_epi64(ki, 52 - kTableBits));
  const __m512d s = _mm512_castsi512_pd(bits);
  const __m512d p =
      _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(kC2), r, _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(p, r2, y);
  return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

KV_AVX512 void ExpAvx512(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __mmask8 ok =
        _mm256_cmp_ps_mask(v, _mm256_set1_ps(kLowest), _CMP_GE_OQ) &
        _mm256_cmp_ps_mask(v, _mm256_setzero_ps(), _CMP_LE_OQ);
    alignas(32) float in[8];
    if (ok != 0xFF) _mm256_store_ps(in, v);
    _mm256_storeu_ps(x + i, Exp8(v));
    for (int l = 0; ok != 0xFF && l < 8; ++l) {
      if (!(ok >> l & 1)) x[i + l] = std::exp(in[l]);
    }
  }
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

using ExpFn = void (*)(float*, size_t);

// The widest vector path this CPU runs.
ExpFn VectorPath() {
  return CpuFeaturesInUse().avx512 ? ExpAvx512 : ExpAvx2;
}

// Compares the vector path with std::exp over a spread of arguments in
// its range: a C library with another expf algorithm must not change
// results, it only loses the speed.
bool VectorPathMatches() {
  if (!CpuFeaturesInUse().avx2) return false;
  constexpr int kSamples = 1 << 14;
  static float x[kSamples];
  const uint32_t lo = 0x80000000u, hi = 0xC2CFF1B4u;  // -0 .. kLowest
  for (int i = 0; i < kSamples; ++i) {
    const uint32_t u = lo + static_cast<uint32_t>(
                                (uint64_t{hi - lo} * i) / (kSamples - 1));
    std::memcpy(&x[i], &u, 4);
  }
  static float y[kSamples];
  std::memcpy(y, x, sizeof(x));
  VectorPath()(y, kSamples);
  for (int i = 0; i < kSamples; ++i) {
    const float want = std::exp(x[i]);
    if (std::memcmp(&want, &y[i], 4) != 0) return false;
  }
  return true;
}
#endif  // KVAULT_EXACT_EXP_AVX2

}  // namespace

bool ExpInPlaceIsVectorized() {
#ifdef KVAULT_EXACT_EXP_AVX2
  static const bool kVector = VectorPathMatches();
  return kVector;
#else
  return false;
#endif
}

void ExpInPlace(float* x, size_t n) {
#ifdef KVAULT_EXACT_EXP_AVX2
  static const ExpFn kVector = VectorPath();
  if (ExpInPlaceIsVectorized()) return kVector(x, n);
#endif
  for (size_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

}  // namespace kvault
