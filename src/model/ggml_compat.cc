#include "model/ggml_compat.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/float16.h"
#include "model/kernels/compute_pool.h"
#include "model/kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVAULT_GGML_COMPAT_AVX2 1
#define KV_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KV_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c")))
#endif

// Every fused operation below is an explicit std::fma or intrinsic. GCC
// contracts a * b + c into an FMA in C++ wherever FMA is enabled (the
// AVX2 functions), so unfused tails live in non-inlined portable helpers.
namespace kvault::ggml_compat {
namespace {

// Whether `isa` (one of kernels::SupportedIsas()) runs the AVX2 forms
// below, and the AVX-512 ones (GemmTiles512, SwiGluAvx512) on top of them.
// Every form gives the portable reference's bits.
bool UsesAvx2(kernels::Isa isa) {
#ifdef KVAULT_GGML_COMPAT_AVX2
  return isa != kernels::Isa::kScalar;
#else
  (void)isa;
  return false;
#endif
}

bool UsesAvx512(kernels::Isa isa) {
  return UsesAvx2(isa) && isa == kernels::Isa::kAvx512;
}

// Value i of a weight row.
inline float WeightAt(const std::byte* row, bool f16, int64_t i) {
  if (f16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return HalfToFloat(h);
  }
  float f;
  std::memcpy(&f, row + 4 * i, 4);
  return f;
}

// ---- portable reference: ggml's operations one lane at a time ----

// Returns head plus the products of values [begin, end) added one at a
// time as ggml_vec_dot's tails: F32 unfused in float, F16 in double.
__attribute__((noinline)) float AddTail(float head, const std::byte* row,
                                        bool f16, const float* x, int64_t begin,
                                        int64_t end) {
  if (!f16) {
    float sum = head;
    for (int64_t c = begin; c < end; ++c) {
      sum = sum + WeightAt(row, f16, c) * x[c];
    }
    return sum;
  }
  double sum = head;
  for (int64_t c = begin; c < end; ++c) {
    sum += static_cast<double>(WeightAt(row, f16, c) * x[c]);
  }
  return static_cast<float>(sum);
}

float GemvPortable(const std::byte* row, bool f16, const float* x, int64_t k) {
  const int64_t np = k & ~int64_t{31};
  float acc[4][8] = {};
  for (int64_t l = 0; l < np; l += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 8; ++i) {
        const int64_t c = l + 8 * j + i;
        acc[j][i] = std::fma(WeightAt(row, f16, c), x[c], acc[j][i]);
      }
    }
  }
  float r[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i]);
  }
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = r[i] + r[i + 4];
  const float head = (t[0] + t[1]) + (t[2] + t[3]);
  return AddTail(head, row, f16, x, np, k);
}

// DotF16 of an AVX-512 build, one lane at a time.
float DotF16Avx512Portable(const std::byte* k, const float* q, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  float acc[4][16] = {};
  for (int64_t l = 0; l < np; l += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 16; ++i) {
        const int64_t c = l + 16 * j + i;
        acc[j][i] = std::fma(WeightAt(k, true, c), q[c], acc[j][i]);
      }
    }
  }
  float r[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i]);
  }
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = (r[i] + r[i + 8]) + (r[i + 4] + r[i + 12]);
  return AddTail((t[0] + t[2]) + (t[1] + t[3]), k, true, q, np, n);
}

float GemmPortable(const std::byte* row, bool f16, const float* x, int64_t k) {
  float acc[8] = {};
  for (int64_t l = 0; l < k; l += 8) {
    for (int i = 0; i < 8; ++i) {
      acc[i] = std::fma(WeightAt(row, f16, l + i), x[l + i], acc[i]);
    }
  }
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = acc[i + 4] + acc[i];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

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

#ifdef KVAULT_GGML_COMPAT_AVX2

// Templated on the weight type so the loops below carry no branch.
template <bool kF16>
KV_AVX2 inline __m256 LoadWeights8(const std::byte* row, int64_t i) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
}

// The kGemv reduction of the four accumulators: (a0+a2)+(a1+a3), lanes
// lo+hi, then two hadds.
KV_AVX2 inline float ReduceGemv(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 r = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  t = _mm_hadd_ps(t, t);
  t = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(t);
}

template <bool kF16>
KV_AVX2 float GemvAvx2(const std::byte* row, const float* x, int64_t k) {
  const int64_t np = k & ~int64_t{31};
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t l = 0; l < np; l += 32) {
    a0 =
        _mm256_fmadd_ps(LoadWeights8<kF16>(row, l), _mm256_loadu_ps(x + l), a0);
    a1 = _mm256_fmadd_ps(LoadWeights8<kF16>(row, l + 8),
                         _mm256_loadu_ps(x + l + 8), a1);
    a2 = _mm256_fmadd_ps(LoadWeights8<kF16>(row, l + 16),
                         _mm256_loadu_ps(x + l + 16), a2);
    a3 = _mm256_fmadd_ps(LoadWeights8<kF16>(row, l + 24),
                         _mm256_loadu_ps(x + l + 24), a3);
  }
  return AddTail(ReduceGemv(a0, a1, a2, a3), row, kF16, x, np, k);
}

// DotF16Avx512Portable's bits with AVX2: each 16-lane accumulator is two
// 8-lane ones (lanes 0-7 and 8-15), the same products in the same order.
KV_AVX2 float DotF16Avx512Avx2(const std::byte* k, const float* q, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t l = 0; l < np; l += 64) {
    for (int j = 0; j < 4; ++j) {
      const int64_t c = l + 16 * j;
      lo[j] = _mm256_fmadd_ps(LoadWeights8<true>(k, c), _mm256_loadu_ps(q + c),
                              lo[j]);
      hi[j] = _mm256_fmadd_ps(LoadWeights8<true>(k, c + 8),
                              _mm256_loadu_ps(q + c + 8), hi[j]);
    }
  }
  const __m256 r_lo =
      _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
  const __m256 r_hi =
      _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
  const __m256 r8 = _mm256_add_ps(r_lo, r_hi);  // lanes i + (i+8)
  __m128 t =
      _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));  // [t0+t2, t1+t3, ..]
  t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));
  return AddTail(_mm_cvtss_f32(t), k, true, q, np, n);
}

// GemvAvx2 of rows[0] and rows[1] at once into y[0] and y[1]: one row's
// four FMA chains leave half the FMA units idle for their latency; two
// rows' eight chains fill them. Each row's operations are GemvAvx2's, so
// the bits are the same.
template <bool kF16>
KV_AVX2 void Gemv2Avx2(const std::byte* const* rows, const float* x, int64_t k,
                       float* y) {
  const int64_t np = k & ~int64_t{31};
  __m256 a[2][4];
  for (auto& row_acc : a) {
    for (__m256& v : row_acc) v = _mm256_setzero_ps();
  }
  for (int64_t l = 0; l < np; l += 32) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256 xv = _mm256_loadu_ps(x + l + 8 * j);
      a[0][j] =
          _mm256_fmadd_ps(LoadWeights8<kF16>(rows[0], l + 8 * j), xv, a[0][j]);
      a[1][j] =
          _mm256_fmadd_ps(LoadWeights8<kF16>(rows[1], l + 8 * j), xv, a[1][j]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    y[i] = AddTail(ReduceGemv(a[i][0], a[i][1], a[i][2], a[i][3]), rows[i],
                   kF16, x, np, k);
  }
}

KV_AVX2 inline float Hsum8(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}

// Runs the kGemm accumulation of 4 rows for kTokens tokens over values
// [l0, l1) of k, continuing from and back into state ([kTokens][4][8]
// accumulator lanes): splitting k into chunks so a chunk of the rows and
// of x stays in L1 leaves every lane's FMA sequence, hence every bit,
// unchanged. 4 x 3 accumulators and 4 weight vectors fill AVX2's 16
// registers.
template <bool kF16, int kTokens>
KV_AVX2 void Gemm4Chunk(const std::byte* const* rows, const float* const* x,
                        int64_t l0, int64_t l1, float* state) {
  __m256 acc[kTokens][4];
  for (int i = 0; i < kTokens; ++i) {
    for (int j = 0; j < 4; ++j) {
      acc[i][j] = _mm256_loadu_ps(state + (4 * i + j) * 8);
    }
  }
  // Fully unrolled so the accumulators stay in registers.
  for (int64_t l = l0; l < l1; l += 8) {
    __m256 w[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) w[j] = LoadWeights8<kF16>(rows[j], l);
#pragma GCC unroll 3
    for (int i = 0; i < kTokens; ++i) {
      const __m256 xv = _mm256_loadu_ps(x[i] + l);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        acc[i][j] = _mm256_fmadd_ps(w[j], xv, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kTokens; ++i) {
    for (int j = 0; j < 4; ++j) {
      _mm256_storeu_ps(state + (4 * i + j) * 8, acc[i][j]);
    }
  }
}

// The tinyBLAS horizontal sum of the 8 lanes at v.
KV_AVX2 float HsumLanes(const float* v) { return Hsum8(_mm256_loadu_ps(v)); }

// ggml_v_expf on 8 lanes; lanes outside the polynomial's range (|n| > 126,
// rare) take the portable path, which gives the same bits.
KV_AVX2 __m256 VExpf8(__m256 x) {
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

KV_AVX2 int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n,
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
KV_AVX512 __m512 VExpf16(__m512 x) {
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

KV_AVX512 int64_t SwiGluAvx512(const float* gate, const float* up, int64_t n,
                               float* out) {
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

// ---- AVX-512 tiles: 8 rows x up to 6 tokens in 24 zmm accumulators ----
// A zmm holds the 8 kGemm lanes of two rows (rows 2p and 2p+1 of a tile)
// for one token; x's 8 values are broadcast to both halves. Every lane
// sees the same FMA sequence as Gemm4Chunk's ymm lanes, so the bits are
// the same; only the register blocking differs (more rows and tokens per
// loaded value).
constexpr int kTileRows = 8;
constexpr int kTileTokens = 6;

// Packs rows [r, r + 8) converted to f32 as [k / 8][4 pairs][2 rows][8].
KV_AVX512 void PackTile(const kernels::MatrixView& w, int64_t r,
                        float* packed) {
  const bool f16 = w.type == GgmlType::kF16;
  for (int64_t s = 0; s < w.cols / 8; ++s) {
    for (int j = 0; j < kTileRows; ++j) {
      const std::byte* row = w.data + (r + j) * w.row_bytes;
      float* dst = packed + s * 64 + (j / 2) * 16 + (j % 2) * 8;
      _mm256_storeu_ps(dst, f16 ? LoadWeights8<true>(row, 8 * s)
                                : LoadWeights8<false>(row, 8 * s));
    }
  }
}

// GCC 12's _mm512 shuffles and broadcasts leave an "undefined" source
// that -Wmaybe-uninitialized reports; they write every lane.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Tile8Chunk's final horizontal sums: lane 0 of each row's 8 lanes gets
// Hsum8's value, by the same additions (hi + lo halves, then lanes 0 + 2
// and 1 + 3, then those two); rows 2p and 2p+1 land in lanes 0 and 8.
KV_AVX512 inline void StoreTileSums(const __m512* acc, float* out) {
  for (int p = 0; p < 4; ++p) {
    __m512 v = acc[p];
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    out[2 * p] = _mm512_cvtss_f32(v);
    out[2 * p + 1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2));
  }
}

// Continues the accumulation of one 8-row tile for kTokens tokens over
// steps [s0, s1) (values [8 s0, 8 s1) of k), starting from zero when s0 is
// 0 and else from state ([kTokens][4 pairs][16 lanes]). Stores the lanes
// back into state, or when out is non-null (the last chunk) the 8 rows'
// sums at out[i][0, 8) instead.
template <int kTokens>
KV_AVX512 void Tile8Chunk(const float* packed, const float* const* x,
                          int64_t s0, int64_t s1, float* state,
                          float* const* out) {
  __m512 acc[kTokens][4];
  for (int i = 0; i < kTokens; ++i) {
    for (int p = 0; p < 4; ++p) {
      acc[i][p] = s0 == 0 ? _mm512_setzero_ps()
                          : _mm512_loadu_ps(state + (4 * i + p) * 16);
    }
  }
  // Fully unrolled so the 24 accumulators stay in registers (GCC keeps
  // them on the stack otherwise: a load and a store around every FMA).
  for (int64_t s = s0; s < s1; ++s) {
    __m512 wv[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)
      wv[p] = _mm512_loadu_ps(packed + s * 64 + 16 * p);
#pragma GCC unroll 6
    for (int i = 0; i < kTokens; ++i) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[i] + 8 * s));
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        acc[i][p] = _mm512_fmadd_ps(wv[p], xv, acc[i][p]);
      }
    }
  }
  for (int i = 0; i < kTokens; ++i) {
    if (out != nullptr) {
      StoreTileSums(acc[i], out[i]);
      continue;
    }
    for (int p = 0; p < 4; ++p) {
      _mm512_storeu_ps(state + (4 * i + p) * 16, acc[i][p]);
    }
  }
}
#pragma GCC diagnostic pop

using TileFn = void (*)(const float*, const float* const*, int64_t, int64_t,
                        float*, float* const*);
constexpr TileFn kTileFns[kTileTokens + 1] = {
    nullptr,        &Tile8Chunk<1>, &Tile8Chunk<2>, &Tile8Chunk<3>,
    &Tile8Chunk<4>, &Tile8Chunk<5>, &Tile8Chunk<6>};

// y[t, r] for the tokens in gemm and rows [r0, r0 + 8 * num_tiles). The k
// loop is cut into chunks so a chunk of the packed rows stays in L2 and a
// token tile's x chunk in L1 while every tile of rows uses it.
void GemmTiles512(const kernels::MatrixView& w, const float* x,
                  std::span<const uint32_t> gemm, int64_t r0, int64_t num_tiles,
                  float* y) {
  const int64_t k = w.cols;
  const size_t n = gemm.size();
  thread_local std::vector<float> packed;  // [num_tiles, k / 8, 64]
  // [token tile, row tile, token in tile, 4 pairs, 16 lanes]
  thread_local std::vector<float> state;
  packed.resize(num_tiles * k * kTileRows);
  for (int64_t t = 0; t < num_tiles; ++t) {
    PackTile(w, r0 + t * kTileRows, &packed[t * k * kTileRows]);
  }
  state.resize(n * num_tiles * 64);
  constexpr int64_t kChunkSteps = 64;  // 512 values of k
  const int64_t num_steps = k / 8;
  for (int64_t s0 = 0; s0 < num_steps; s0 += kChunkSteps) {
    const int64_t s1 = std::min(num_steps, s0 + kChunkSteps);
    for (size_t i = 0; i < n; i += kTileTokens) {
      const int m = static_cast<int>(std::min<size_t>(kTileTokens, n - i));
      const float* xs[kTileTokens];
      for (int j = 0; j < m; ++j) xs[j] = x + gemm[i + j] * k;
      for (int64_t t = 0; t < num_tiles; ++t) {
        float* out[kTileTokens];
        for (int j = 0; j < m; ++j) {
          out[j] = y + gemm[i + j] * w.rows + r0 + t * kTileRows;
        }
        kTileFns[m](&packed[t * k * kTileRows], xs, s0, s1,
                    &state[(i * num_tiles + t * m) * 64],
                    s1 == num_steps ? out : nullptr);
      }
    }
  }
}

#endif  // KVAULT_GGML_COMPAT_AVX2

float Gemv(const std::byte* row, bool f16, const float* x, int64_t k,
           kernels::Isa isa) {
#ifdef KVAULT_GGML_COMPAT_AVX2
  if (UsesAvx2(isa)) {
    return f16 ? GemvAvx2<true>(row, x, k) : GemvAvx2<false>(row, x, k);
  }
#endif
  return GemvPortable(row, f16, x, k);
}

// y[i] = Gemv(rows[i], f16, x, k, isa) for i < 2.
void Gemv2(const std::byte* const* rows, bool f16, const float* x, int64_t k,
           kernels::Isa isa, float* y) {
#ifdef KVAULT_GGML_COMPAT_AVX2
  if (UsesAvx2(isa)) {
    f16 ? Gemv2Avx2<true>(rows, x, k, y) : Gemv2Avx2<false>(rows, x, k, y);
    return;
  }
#endif
  for (int i = 0; i < 2; ++i) y[i] = GemvPortable(rows[i], f16, x, k);
}

// y[t, r] for rows [r0, r1) and the tokens listed in gemv (kGemv order).
// Row r is paired with r + half: rows next to each other (often 4 KiB
// apart) read as two streams measured ~35 % slower than rows far apart.
void GemvRows(const kernels::MatrixView& w, const float* x,
              std::span<const uint32_t> gemv, int64_t r0, int64_t r1,
              kernels::Isa isa, float* y) {
  const bool f16 = w.type == GgmlType::kF16;
  const int64_t k = w.cols;
  const int64_t half = (r1 - r0) / 2;
  for (int64_t r = r0; r < r0 + half; ++r) {
    const std::byte* rows[2] = {w.data + r * w.row_bytes,
                                w.data + (r + half) * w.row_bytes};
    for (uint32_t t : gemv) {
      float pair[2];
      Gemv2(rows, f16, x + t * k, k, isa, pair);
      y[t * w.rows + r] = pair[0];
      y[t * w.rows + r + half] = pair[1];
    }
  }
  for (int64_t r = r0 + 2 * half; r < r1; ++r) {
    const std::byte* row = w.data + r * w.row_bytes;
    for (uint32_t t : gemv) {
      y[t * w.rows + r] = Gemv(row, f16, x + t * k, k, isa);
    }
  }
}

#ifdef KVAULT_GGML_COMPAT_AVX2

// Continues the kGemm accumulation of one group of 4 rows over values
// [l0, l1) for every token in gemm; state holds [token][row][lane].
void Gemm4Group(const std::byte* const* rows, bool row_f16, const float* x,
                int64_t k, std::span<const uint32_t> gemm, int64_t l0,
                int64_t l1, float* state) {
  const size_t n = gemm.size();
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const float* xs[3];
    for (int m = 0; m < 3; ++m) xs[m] = x + gemm[i + m] * k;
    if (row_f16) {
      Gemm4Chunk<true, 3>(rows, xs, l0, l1, state + i * 32);
    } else {
      Gemm4Chunk<false, 3>(rows, xs, l0, l1, state + i * 32);
    }
  }
  for (; i < n; ++i) {
    const float* xs[1] = {x + gemm[i] * k};
    if (row_f16) {
      Gemm4Chunk<true, 1>(rows, xs, l0, l1, state + i * 32);
    } else {
      Gemm4Chunk<false, 1>(rows, xs, l0, l1, state + i * 32);
    }
  }
}

// y[t, r] in kGemm order for the tokens in gemm and rows [r0, r0 + 4 g),
// g = (r1 - r0) / 4, 4 rows at a time (Gemm4Chunk); returns r0 + 4 g.
int64_t GemmGroupsAvx2(const kernels::MatrixView& w, const float* x,
                       std::span<const uint32_t> gemm, int64_t r0, int64_t r1,
                       float* y) {
  const int64_t k = w.cols;
  // F16 rows are converted to f32 once (exactly) rather than per token.
  thread_local std::vector<float> converted;  // [r1 - r0, k]
  const bool convert = w.type == GgmlType::kF16 && gemm.size() >= 2;
  if (convert) {
    converted.resize((r1 - r0) * k);
    for (int64_t i = r0; i < r1; ++i) {
      HalfToFloatRow(std::span(w.data + i * w.row_bytes, 2 * k),
                     std::span(&converted[(i - r0) * k], k));
    }
  }
  const bool row_f16 = w.type == GgmlType::kF16 && !convert;
  auto row_at = [&](int64_t i) {
    return convert
               ? reinterpret_cast<const std::byte*>(&converted[(i - r0) * k])
               : w.data + i * w.row_bytes;
  };
  const int64_t num_groups = (r1 - r0) / 4;
  const size_t n = gemm.size();
  thread_local std::vector<float> state;  // [group, token, row, lane]
  state.assign(num_groups * n * 32, 0.0f);
  constexpr int64_t kChunk = 512;  // values of k per pass; a multiple of 8
  for (int64_t l0 = 0; l0 < k; l0 += kChunk) {
    const int64_t l1 = std::min(k, l0 + kChunk);
    for (int64_t g = 0; g < num_groups; ++g) {
      const std::byte* rows[4];
      for (int j = 0; j < 4; ++j) rows[j] = row_at(r0 + 4 * g + j);
      Gemm4Group(rows, row_f16, x, k, gemm, l0, l1, &state[g * n * 32]);
    }
  }
  for (int64_t g = 0; g < num_groups; ++g) {
    for (size_t i = 0; i < n; ++i) {
      for (int j = 0; j < 4; ++j) {
        y[gemm[i] * w.rows + r0 + 4 * g + j] =
            HsumLanes(&state[((g * n + i) * 4 + j) * 8]);
      }
    }
  }
  return r0 + 4 * num_groups;
}

#endif  // KVAULT_GGML_COMPAT_AVX2

// y[t, r] for rows [r0, r1) and the tokens listed in gemm (kGemm order).
void GemmRows(const kernels::MatrixView& w, const float* x,
              std::span<const uint32_t> gemm, int64_t r0, int64_t r1,
              kernels::Isa isa, float* y) {
#ifdef KVAULT_GGML_COMPAT_AVX2
  if (UsesAvx512(isa) && r1 - r0 >= kTileRows) {
    const int64_t num_tiles = (r1 - r0) / kTileRows;
    GemmTiles512(w, x, gemm, r0, num_tiles, y);
    r0 += num_tiles * kTileRows;
  }
  if (UsesAvx2(isa) && r0 < r1) r0 = GemmGroupsAvx2(w, x, gemm, r0, r1, y);
#endif
  const bool f16 = w.type == GgmlType::kF16;
  for (int64_t r = r0; r < r1; ++r) {
    const std::byte* row = w.data + r * w.row_bytes;
    for (uint32_t t : gemm) {
      y[t * w.rows + r] = GemmPortable(row, f16, x + t * w.cols, w.cols);
    }
  }
}

// x rounded to fp16 (as ggml converts activations for F16 weights), one
// row of k values per token.
std::vector<float> RoundedToHalf(const float* x, size_t num_tokens, int64_t k) {
  std::vector<float> rounded(num_tokens * k);
  std::vector<std::byte> half(2 * k);
  for (size_t t = 0; t < num_tokens; ++t) {
    FloatToHalfRow(std::span(x + t * k, k), half);
    HalfToFloatRow(half, std::span(&rounded[t * k], k));
  }
  return rounded;
}

}  // namespace

bool Supports(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16;
}

void MatMul(const kernels::MatrixView& w, const float* x,
            std::span<const DotOrder> order, float* y, kernels::Isa isa,
            kernels::ComputePool* pool) {
  const int64_t k = w.cols;
  std::vector<float> rounded;  // [num_tokens, k]
  if (w.type == GgmlType::kF16) {
    rounded = RoundedToHalf(x, order.size(), k);
    x = rounded.data();
  }
  std::vector<uint32_t> gemv, gemm;
  for (size_t t = 0; t < order.size(); ++t) {
    const bool tiled = order[t] == DotOrder::kGemm && k % 8 == 0;
    (tiled ? gemm : gemv).push_back(static_cast<uint32_t>(t));
  }
  constexpr int64_t kRowsPerTask = 64;  // a multiple of the 8-row tiles
  const size_t num_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  auto task = [&](size_t i) {
    const int64_t r0 = static_cast<int64_t>(i) * kRowsPerTask;
    const int64_t r1 = std::min(w.rows, r0 + kRowsPerTask);
    if (!gemv.empty()) GemvRows(w, x, gemv, r0, r1, isa, y);
    if (!gemm.empty()) GemmRows(w, x, gemm, r0, r1, isa, y);
  };
  // Below this many multiply-adds one thread is faster than handing out
  // tasks; the split never changes a result.
  constexpr int64_t kMinParallelWork = 1 << 16;
  const int64_t work = w.rows * k * static_cast<int64_t>(order.size());
  if (pool == nullptr || num_tasks < 2 || work < kMinParallelWork) {
    for (size_t i = 0; i < num_tasks; ++i) task(i);
  } else {
    pool->ParallelFor(num_tasks, task);
  }
}

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
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return avx512 ? GgmlBuild::kAvx512 : GgmlBuild::kAvx2;
#else
  return GgmlBuild::kAvx2;
#endif
}

void SwiGlu(const float* gate, const float* up, int64_t n, GgmlBuild build,
            kernels::Isa isa, float* out) {
  const int64_t block = build == GgmlBuild::kAvx512 ? 16 : 8;
  int64_t i = 0;
#ifdef KVAULT_GGML_COMPAT_AVX2
  if (build == GgmlBuild::kAvx2 && UsesAvx2(isa)) {
    i = SwiGluAvx2(gate, up, n, out);
  }
  if (build == GgmlBuild::kAvx512 && UsesAvx512(isa)) {
    i = SwiGluAvx512(gate, up, n, out);
  }
#endif
  for (; i + block <= n; i += block) {
    for (int64_t j = i; j < i + block; ++j) {
      const float g = gate[j];
      const float e = block == 16 ? VExpf512(0.0f - g) : VExpf(0.0f - g);
      out[j] = (g / (1.0f + e)) * up[j];
    }
  }
  for (; i < n; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

float DotF16(const std::byte* k, const float* q, int64_t n, GgmlBuild build,
             kernels::Isa isa) {
  if (build == GgmlBuild::kAvx2) return Gemv(k, /*f16=*/true, q, n, isa);
#ifdef KVAULT_GGML_COMPAT_AVX2
  if (UsesAvx2(isa)) return DotF16Avx512Avx2(k, q, n);
#endif
  return DotF16Avx512Portable(k, q, n);
}

}  // namespace kvault::ggml_compat
