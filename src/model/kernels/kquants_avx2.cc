// AVX2 MatMul kernels for the K-quants (but Q4_K and Q6_K:
// q4_k_lanes_avx2.cc, q6_k_lanes_avx2.cc) and IQ4_XS against Q8_K
// activations. Compiled with -mavx2 -mfma -mf16c and called only after CPU
// detection (intrinsics and internal-linkage helpers only; see
// kernel_table.h).
//
// A super-block is unpacked into eight ymm of 32 values in natural order
// (register c = values 32c .. 32c + 31); vpmaddubsw + vpmaddwd make int32
// lane m of register c the exact sum of values 32c + 4m .. + 3 times x,
// then times their scale. These are the integer lanes of llama.cpp's AVX2
// kernels, and the float steps are those of the scalar references in
// quant_scalar.cc (DotKLanes8, DotKStepped), so the results are theirs bit
// for bit: llama.cpp b10573's orders.
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/kernels/quant_blocks.h"
#include "model/kernels/quant_scalar.h"

namespace kvault::kernels {
namespace {

#include "model/kernels/helpers_avx2.inc"

constexpr int kRegs = 8;  // ymm of 32 values per super-block

enum class KType { kQ2_K, kQ3_K, kQ5_K, kIQ4_XS };

// One unpacked weight super-block.
struct SuperBlock {
  __m256i q[kRegs];      // values (unsigned, or signed for kSigned types)
  __m256i scale[kRegs];  // int32 per lane: the scale of its 4 values
  int32_t min[16];       // per 16-value group (Q2_K, Q5_K)
  float d;
  float dmin;
};

// Whether `t` keeps signed values (multiplied with the sign trick).
constexpr bool Signed(KType t) {
  return t == KType::kQ3_K || t == KType::kIQ4_XS;
}

inline __m256i Load32(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Lanes 0-3 take group scale s0 (values 0-15), lanes 4-7 s1.
inline __m256i GroupScales(int32_t s0, int32_t s1) {
  return _mm256_set_m128i(_mm_set1_epi32(s1), _mm_set1_epi32(s0));
}

void UnpackQ45(const std::byte* blk, bool q5, SuperBlock* s) {
  const std::byte* qs = blk + (q5 ? q5_k::kQs : q4_k::kQs);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i qh = q5 ? Load32(blk + q5_k::kQh) : _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256i b = Load32(qs + 32 * k);
    s->q[2 * k] = _mm256_and_si256(b, m4);
    s->q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
  }
  for (int c = 0; q5 && c < kRegs; ++c) {  // bit c of qh[l] is bit 4
    const __m256i bit =
        _mm256_and_si256(_mm256_srli_epi16(qh, c), _mm256_set1_epi8(1));
    s->q[c] = _mm256_or_si256(s->q[c], _mm256_slli_epi16(bit, 4));
  }
  uint8_t scales[8], mins[8];
  UnpackQ4KScales(reinterpret_cast<const uint8_t*>(blk + q4_k::kScales), scales,
                  mins);
  for (int c = 0; c < kRegs; ++c) {
    s->scale[c] = _mm256_set1_epi32(scales[c]);
    s->min[2 * c] = s->min[2 * c + 1] = mins[c];
  }
  s->d = HalfAt(blk + q4_k::kD);
  s->dmin = HalfAt(blk + q4_k::kDmin);
}

void UnpackQ23(const std::byte* blk, bool q3, SuperBlock* s) {
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m256i hm = q3 ? Load32(blk + q3_k::kHmask) : _mm256_setzero_si256();
  for (int n = 0; n < 2; ++n) {
    const __m256i q = Load32(blk + (q3 ? q3_k::kQs : q2_k::kQs) + 32 * n);
    for (int j = 0; j < 4; ++j) {
      __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
      if (q3) {  // value - 4 where the high bit 4n + j is clear
        const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * n + j),
                                             _mm256_set1_epi8(1));
        v = _mm256_sub_epi8(v, _mm256_andnot_si256(_mm256_slli_epi16(bit, 2),
                                                   _mm256_set1_epi8(4)));
      }
      s->q[4 * n + j] = v;
    }
  }
  int32_t sc[16];
  if (q3) {
    int8_t s8[16];
    UnpackQ3KScales(reinterpret_cast<const uint8_t*>(blk + q3_k::kScales), s8);
    for (int g = 0; g < 16; ++g) sc[g] = s8[g];
    s->d = HalfAt(blk + q3_k::kD);
  } else {
    for (int g = 0; g < 16; ++g) {
      const int v = std::to_integer<int>(blk[q2_k::kScales + g]);
      sc[g] = v & 0x0F;
      s->min[g] = v >> 4;
    }
    s->d = HalfAt(blk + q2_k::kD);
    s->dmin = HalfAt(blk + q2_k::kDmin);
  }
  for (int c = 0; c < kRegs; ++c) {
    s->scale[c] = GroupScales(sc[2 * c], sc[2 * c + 1]);
  }
}

void UnpackIq4xs(const std::byte* blk, SuperBlock* s) {
  const __m256i levels = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  uint16_t scales_h;
  std::memcpy(&scales_h, blk + iq4_xs::kScalesH, sizeof(scales_h));
  for (int c = 0; c < kRegs; ++c) {
    const __m128i b = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(blk + iq4_xs::kQs + 16 * c));
    const __m256i idx = _mm256_set_m128i(
        _mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
    s->q[c] = _mm256_shuffle_epi8(levels, idx);
    const int low =
        (std::to_integer<int>(blk[iq4_xs::kScalesL + c / 2]) >> (4 * (c % 2))) &
        0x0F;
    s->scale[c] =
        _mm256_set1_epi32((low | (((scales_h >> (2 * c)) & 3) << 4)) - 32);
  }
  s->d = HalfAt(blk + iq4_xs::kD);
}

template <KType kType>
void Unpack(const std::byte* blk, SuperBlock* s) {
  if constexpr (kType == KType::kQ5_K) {
    UnpackQ45(blk, /*q5=*/true, s);
  } else if constexpr (kType == KType::kIQ4_XS) {
    UnpackIq4xs(blk, s);
  } else {
    UnpackQ23(blk, kType == KType::kQ3_K, s);
  }
}

// Lane m of register c: (values 32c + 4m .. + 3) . x times their scale.
template <KType kType>
inline __m256i RegLanes(const SuperBlock& s, const std::byte* xq, int c) {
  const __m256i x = Load32(xq + 32 * c);
  __m256i p16;
  if constexpr (Signed(kType)) {
    p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(s.q[c], s.q[c]),
                               _mm256_sign_epi8(x, s.q[c]));
  } else {
    p16 = _mm256_maddubs_epi16(s.q[c], x);
  }
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  return _mm256_mullo_epi32(p32, s.scale[c]);
}

// One row's unpacked super-blocks `w` against one token in the order
// `gemm` selects (Q2_K).
template <KType kType>
float DotRow(const SuperBlock* w, const std::byte* x, int64_t nb, bool gemm) {
  constexpr bool kStepped = kType == KType::kQ2_K;
  const int step_regs = !gemm ? kRegs : 4;
  __m256 acc8 = _mm256_setzero_ps();
  float acc = 0.0f, accm = 0.0f, summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const SuperBlock& s = w[b];
    const std::byte* xb = x + b * q8_k::kBytes;
    float xd;
    std::memcpy(&xd, xb + q8_k::kD, sizeof(xd));
    int16_t bsums[16];
    std::memcpy(bsums, xb + q8_k::kBsums, sizeof(bsums));
    const std::byte* xq = xb + q8_k::kQs;
    if constexpr (kStepped) {
      const float dd = s.d * xd, dm = s.dmin * xd;
      for (int c0 = 0; c0 < kRegs; c0 += step_regs) {
        __m256i lanes = _mm256_setzero_si256();
        int32_t imin = 0;
        for (int c = c0; c < c0 + step_regs; ++c) {
          lanes = _mm256_add_epi32(lanes, RegLanes<kType>(s, xq, c));
          imin +=
              s.min[2 * c] * bsums[2 * c] + s.min[2 * c + 1] * bsums[2 * c + 1];
        }
        acc = std::fma(static_cast<float>(HSumI32(lanes)), dd, acc);
        accm = std::fma(static_cast<float>(imin), dm, accm);
      }
      continue;
    }
    __m256i lanes = _mm256_setzero_si256();
    for (int c = 0; c < kRegs; ++c) {
      lanes = _mm256_add_epi32(lanes, RegLanes<kType>(s, xq, c));
    }
    acc8 = _mm256_fmadd_ps(_mm256_set1_ps(s.d * xd), _mm256_cvtepi32_ps(lanes),
                           acc8);
    if constexpr (kType == KType::kQ5_K) {
      int32_t mins = 0;
      for (int g = 0; g < 16; ++g) mins += s.min[g] * bsums[g];
      summs = std::fma(-xd * s.dmin, static_cast<float>(mins), summs);
    }
  }
  if constexpr (kStepped) return acc - accm;
  if constexpr (kType == KType::kQ5_K) return HSum(acc8) + summs;
  return HSum(acc8);
}

// Each row is unpacked once and multiplied with every token.
template <KType kType, int kBytes>
void MatMulRows(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<SuperBlock> row;
  row.resize(nb);
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      Unpack<kType>(a.w + r * a.w_row_bytes + b * kBytes, &row[b]);
    }
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const bool gemm = a.orders != nullptr && a.orders[t] == DotOrder::kGemm;
      a.y[t * a.y_stride + r] =
          DotRow<kType>(row.data(), a.x + t * a.x_row_bytes, nb, gemm);
    }
  }
}

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
