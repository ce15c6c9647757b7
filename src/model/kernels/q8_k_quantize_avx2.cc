// The AVX2 Q8_K activation quantizer, bit-identical to QuantizeRowQ8_K
// (quant_scalar.cc). Compiled with -mavx2 -mfma -mf16c and called only
// after CPU detection (intrinsics and internal-linkage helpers only; see
// kernel_table.h). The K-quant MatMul kernels are in the *_lanes_avx2.cc
// files.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

// Lanes of 32 int32 values (q[0..3]) truncated to int8 in order, as
// static_cast<int8_t> does: INT_MIN (a NaN's conversion) becomes 0, and
// the rest lie in [-128, 127] so the saturating packs keep them.
inline __m256i ToInt8(const __m256i q[4]) {
  const __m256i int_min = _mm256_set1_epi32(INT32_MIN);
  __m256i v[4];
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_andnot_si256(_mm256_cmpeq_epi32(q[i], int_min), q[i]);
  }
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]),
                                       _mm256_packs_epi32(v[2], v[3]));
  return _mm256_permutevar8x32_epi32(p,
                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The first value of the largest magnitude among x[0, 256) (NaNs skipped,
// as the scalar reference's `>` does), or 0 when all are 0.
float SignedMax(const float* x) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 amax8 = _mm256_setzero_ps();
  for (int i = 0; i < kBlockK / 8; ++i) {
    // max_ps returns its second operand for a NaN.
    amax8 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask),
                          amax8);
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax8),
                        _mm256_extractf128_ps(amax8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float amax = _mm_cvtss_f32(m);
  if (amax == 0.0f) return 0.0f;
  for (int i = 0; i < kBlockK / 8; ++i) {
    const int at = _mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask),
                      _mm256_set1_ps(amax), _CMP_EQ_OQ));
    if (at != 0) return x[8 * i + __builtin_ctz(at)];
  }
  return 0.0f;
}

// Q8_K block of x[0, 256) at y, QuantizeRowQ8_K's bytes.
void QuantizeBlockQ8_K(const float* x, std::byte* y) {
  std::memset(y, 0, q8_k::kBytes);
  const float max = SignedMax(x);
  if (max == 0.0f) return;
  const float iscale = -127.0f / max;
  int32_t lanes[kBlockK / 4];  // sums of 4 values
  for (int c = 0; c < kBlockK / 32; ++c) {
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      // Round half to even (MXCSR's default), then at most 127.
      q[i] = _mm256_min_epi32(
          _mm256_cvtps_epi32(_mm256_mul_ps(
              _mm256_set1_ps(iscale), _mm256_loadu_ps(x + 32 * c + 8 * i))),
          _mm256_set1_epi32(127));
    }
    const __m256i q8 = ToInt8(q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + q8_k::kQs + 32 * c), q8);
    const __m256i s = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 8 * c), s);
  }
  int16_t bsums[16];
  for (int g = 0; g < 16; ++g) {
    bsums[g] = static_cast<int16_t>(lanes[4 * g] + lanes[4 * g + 1] +
                                    lanes[4 * g + 2] + lanes[4 * g + 3]);
  }
  std::memcpy(y + q8_k::kBsums, bsums, sizeof(bsums));
  const float d = 1.0f / iscale;
  std::memcpy(y + q8_k::kD, &d, sizeof(d));
}

}  // namespace

void QuantizeRowQ8_KAvx2(const float* x, int64_t n, std::byte* out) {
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    QuantizeBlockQ8_K(x + b * kBlockK, out + b * q8_k::kBytes);
  }
}

}  // namespace kvault::kernels

#endif
