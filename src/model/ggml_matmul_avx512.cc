// The AVX-512 forms of ggml's float dot orders (ggml_dot.h): the AVX-512
// build's kGemv of two rows at once, and both builds' kGemm in register
// tiles. Each lane sees the portable form's FMA sequence; only the register
// blocking differs, so the bits are the same.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/ggml_dot.h"

#ifdef KVAULT_GGML_X86
#include <immintrin.h>

// GCC 12's _mm512 conversions, extracts, shuffles and broadcasts pass an
// "undefined" merge source that -W(maybe-)uninitialized reports; they
// write every lane.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace kvault::ggml_compat::dot {
namespace {

// Converts (F16) or copies 16 weights starting at value i of a row.
template <bool kF16>
KV_GGML_AVX512 inline __m512 LoadWeights16(const std::byte* row, int64_t i) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
}

// Converts (F16) or copies 8 weights starting at value i of a row.
KV_GGML_AVX512 inline __m256 LoadWeights8(const std::byte* row, bool f16,
                                          int64_t i) {
  if (f16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
}

// _mm512_reduce_add_ps's additions as GCC 12 (which built llama.cpp)
// expands it, spelled out so another compiler cannot reorder them, on the
// 16 lanes lo (0-7) and hi (8-15): lanes i + (i+8), then i + (i+4), then
// (l0+l2) + (l1+l3).
KV_GGML_AVX512 inline float Reduce16(__m256 lo, __m256 hi) {
  const __m256 r8 = _mm256_add_ps(lo, hi);
  __m128 t =
      _mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_shuffle_ps(t, t, 1));
  return _mm_cvtss_f32(t);
}
KV_GGML_AVX512 inline float Reduce16(__m512 v) {
  return Reduce16(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

template <bool kF16>
KV_GGML_AVX512 void Gemv2(const std::byte* const* rows, const float* x,
                          int64_t k, float* y) {
  const int64_t np = k & ~int64_t{63};
  __m512 a[2][4];
  for (auto& row_acc : a) {
    for (__m512& v : row_acc) v = _mm512_setzero_ps();
  }
  for (int64_t l = 0; l < np; l += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 xv = _mm512_loadu_ps(x + l + 16 * j);
      a[0][j] = _mm512_fmadd_ps(LoadWeights16<kF16>(rows[0], l + 16 * j), xv,
                                a[0][j]);
      a[1][j] = _mm512_fmadd_ps(LoadWeights16<kF16>(rows[1], l + 16 * j), xv,
                                a[1][j]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    const __m512 r = _mm512_add_ps(_mm512_add_ps(a[i][0], a[i][2]),
                                   _mm512_add_ps(a[i][1], a[i][3]));
    y[i] = WithTail(Reduce16(r), rows[i], kF16, x, np, k);
  }
}

// Gemv2's results with ymm halves of each 16-lane accumulator: AVX-512VL
// gives 32 ymm registers, room for two rows' 16 halves (F32 rows read
// faster this way; see Gemv2Avx512).
template <bool kF16>
KV_GGML_AVX512 void Gemv2Halves(const std::byte* const* rows, const float* x,
                                int64_t k, float* y) {
  const int64_t np = k & ~int64_t{63};
  __m256 lo[2][4], hi[2][4];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) lo[i][j] = hi[i][j] = _mm256_setzero_ps();
  }
  for (int64_t l = 0; l < np; l += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t c = l + 16 * j;
      const __m256 x_lo = _mm256_loadu_ps(x + c);
      const __m256 x_hi = _mm256_loadu_ps(x + c + 8);
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        lo[i][j] =
            _mm256_fmadd_ps(LoadWeights8(rows[i], kF16, c), x_lo, lo[i][j]);
        hi[i][j] =
            _mm256_fmadd_ps(LoadWeights8(rows[i], kF16, c + 8), x_hi, hi[i][j]);
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    const __m256 r_lo = _mm256_add_ps(_mm256_add_ps(lo[i][0], lo[i][2]),
                                      _mm256_add_ps(lo[i][1], lo[i][3]));
    const __m256 r_hi = _mm256_add_ps(_mm256_add_ps(hi[i][0], hi[i][2]),
                                      _mm256_add_ps(hi[i][1], hi[i][3]));
    y[i] = WithTail(Reduce16(r_lo, r_hi), rows[i], kF16, x, np, k);
  }
}

// ---- kGemm tiles: up to 6 tokens x 4 zmm in 24 accumulators ----
// A tile's 4 zmm per token hold kLanes = 8: the 8 kGemm lanes of rows 2p
// and 2p+1 (8 rows; x's 8 values broadcast to both halves); kLanes = 16:
// the 16 lanes of row p (4 rows). Either way one k step (kLanes values)
// of a tile is 64 packed floats.
constexpr int kTileTokens = 6;

template <int kLanes>
constexpr int TileRows() {
  return 64 / kLanes;
}

// Packs the tile of rows [r, r + TileRows) as f32, [k / kLanes][64].
template <int kLanes>
KV_GGML_AVX512 void PackTile(const kernels::MatrixView& w, int64_t r,
                             float* packed) {
  const bool f16 = w.type == GgmlType::kF16;
  for (int64_t s = 0; s < w.cols / kLanes; ++s) {
    for (int j = 0; j < TileRows<kLanes>(); ++j) {
      const std::byte* row = w.data + (r + j) * w.row_bytes;
      if constexpr (kLanes == 8) {
        _mm256_storeu_ps(packed + s * 64 + (j / 2) * 16 + (j % 2) * 8,
                         LoadWeights8(row, f16, 8 * s));
      } else {
        _mm512_storeu_ps(packed + s * 64 + j * 16,
                         f16 ? LoadWeights16<true>(row, 16 * s)
                             : LoadWeights16<false>(row, 16 * s));
      }
    }
  }
}

// Rows p and q's lanes i + (i+8), i < 8: [p 0-3 | p 4-7 | q 0-3 | q 4-7]
// + [p 8-11 | p 12-15 | q 8-11 | q 12-15].
KV_GGML_AVX512 inline __m512 HalfSums(__m512 p, __m512 q) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
}

// Reduce16 of the 4 rows' accumulators at once, stored at out[0, 4): the
// same additions per row (a + b and b + a round alike), shuffled so that
// each instruction serves all four rows.
KV_GGML_AVX512 inline void StoreRowSums16(const __m512* acc, float* out) {
  const __m512 s01 = HalfSums(acc[0], acc[1]);
  const __m512 s23 = HalfSums(acc[2], acc[3]);
  // Block p: row p's lanes i + (i+4) of its 8 sums, i < 4.
  const __m512 t =
      _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
  // Per block: (t0 + t2) + (t1 + t3) in lane 0.
  const __m512 w =
      _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 z =
      _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i lane0 =
      _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0, z)));
}

// The tile's final sums for one token: kLanes 8: lane 0 of each row's 8
// lanes gets tinyBLAS's hsum (hi + lo halves, then lanes 0 + 2 and 1 + 3,
// then those two; rows 2p and 2p+1 land in lanes 0 and 8); kLanes 16:
// Reduce16 of each row (StoreRowSums16).
template <int kLanes>
KV_GGML_AVX512 inline void StoreTileSums(const __m512* acc, float* out) {
  if constexpr (kLanes == 16) {
    StoreRowSums16(acc, out);
    return;
  }
  for (int p = 0; p < 4; ++p) {
    __m512 v = acc[p];
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    out[2 * p] = _mm512_cvtss_f32(v);
    out[2 * p + 1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2));
  }
}

// Token i's x values for step s, in the lanes of a tile's zmm.
template <int kLanes>
KV_GGML_AVX512 inline __m512 LoadX(const float* x, int64_t s) {
  if constexpr (kLanes == 8) {
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(x + 8 * s));
  }
  return _mm512_loadu_ps(x + 16 * s);
}

// Continues one tile's accumulation for kTokens tokens over steps
// [s0, s1), starting from zero when s0 is 0 and else from state
// ([kTokens][4][16 lanes]); x[i] holds token i's values from step s0 on.
// Stores the lanes back into state, or when out is non-null (the last
// chunk) the tile rows' sums at out[i][0, TileRows).
template <int kLanes, int kTokens>
KV_GGML_AVX512 void TileChunk(const float* packed, const float* const* x,
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
    for (int p = 0; p < 4; ++p) {
      wv[p] = _mm512_loadu_ps(packed + s * 64 + 16 * p);
    }
#pragma GCC unroll 6
    for (int i = 0; i < kTokens; ++i) {
      const __m512 xv = LoadX<kLanes>(x[i], s - s0);
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        acc[i][p] = _mm512_fmadd_ps(wv[p], xv, acc[i][p]);
      }
    }
  }
  for (int i = 0; i < kTokens; ++i) {
    if (out != nullptr) {
      StoreTileSums<kLanes>(acc[i], out[i]);
      continue;
    }
    for (int p = 0; p < 4; ++p) {
      _mm512_storeu_ps(state + (4 * i + p) * 16, acc[i][p]);
    }
  }
}
using TileFn = void (*)(const float*, const float* const*, int64_t, int64_t,
                        float*, float* const*);
template <int kLanes>
constexpr TileFn kTileFns[kTileTokens + 1] = {nullptr,
                                              &TileChunk<kLanes, 1>,
                                              &TileChunk<kLanes, 2>,
                                              &TileChunk<kLanes, 3>,
                                              &TileChunk<kLanes, 4>,
                                              &TileChunk<kLanes, 5>,
                                              &TileChunk<kLanes, 6>};

// The first 64-byte aligned float at or after p (16 floats past p at most).
inline float* AlignedTo64(float* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - a % 64) % 64) / sizeof(float);
}

// k steps per chunk of the tile loop (512 values of 8 lanes, 1024 of 16:
// one tile call's FMAs outweigh its state loads and stores alike).
constexpr int64_t kChunkSteps = 64;

// GemmTiles512 in kLanes lanes for rows [r0, r0 + TileRows * num_tiles).
// The k loop is cut into chunks so a chunk of the packed rows stays in L2
// and a token tile's x chunk in L1 while every tile of rows uses it.
template <int kLanes>
KV_GGML_AVX512 void Tiles(const kernels::MatrixView& w, const float* x,
                          std::span<const uint32_t> gemm, int64_t r0,
                          int64_t num_tiles, float* y) {
  constexpr int kRows = TileRows<kLanes>();
  const int64_t k = w.cols;
  const size_t n = gemm.size();
  // Packed rows 64-byte aligned: a zmm load that straddles two cache
  // lines costs two. The 16-lane tiles load x as zmm too: copied into an
  // aligned chunk when chunks are whole (measured, BM_GgmlMatMul 2048 rows,
  // 64 tokens: k = 2048 5 % faster with the copy, k = 256 2-4 % slower;
  // the 8-lane tiles' 32-byte broadcasts gain nothing from it).
  thread_local std::vector<float> packed_store;  // [num_tiles, k / kLanes, 64]
  thread_local std::vector<float> state;  // [token tile, row tile, token, 64]
  alignas(64) thread_local float x_chunk[kTileTokens][kChunkSteps * 16];
  packed_store.resize(num_tiles * k * kRows + 16);
  float* const packed = AlignedTo64(packed_store.data());
  for (int64_t t = 0; t < num_tiles; ++t) {
    PackTile<kLanes>(w, r0 + t * kRows, &packed[t * k * kRows]);
  }
  state.resize(n * num_tiles * 64);
  const int64_t num_steps = k / kLanes;
  const bool copy_x = kLanes == 16 && num_steps >= kChunkSteps;
  for (int64_t s0 = 0; s0 < num_steps; s0 += kChunkSteps) {
    const int64_t s1 = std::min(num_steps, s0 + kChunkSteps);
    for (size_t i = 0; i < n; i += kTileTokens) {
      const int m = static_cast<int>(std::min<size_t>(kTileTokens, n - i));
      const float* xs[kTileTokens];
      for (int j = 0; j < m; ++j) {
        xs[j] = x + gemm[i + j] * k + s0 * kLanes;
        if (copy_x) {
          std::copy_n(xs[j], (s1 - s0) * kLanes, x_chunk[j]);
          xs[j] = x_chunk[j];
        }
      }
      for (int64_t t = 0; t < num_tiles; ++t) {
        float* out[kTileTokens];
        for (int j = 0; j < m; ++j) {
          out[j] = y + gemm[i + j] * w.rows + r0 + t * kRows;
        }
        kTileFns<kLanes>[m](&packed[t * k * kRows], xs, s0, s1,
                            &state[(i * num_tiles + t * m) * 64],
                            s1 == num_steps ? out : nullptr);
      }
    }
  }
}

}  // namespace

void Gemv2Avx512(const std::byte* const* rows, bool f16, const float* x,
                 int64_t k, GgmlBuild build, float* y) {
  if (build != GgmlBuild::kAvx512) {
    Gemv2Avx2(rows, f16, x, k, build, y);
    return;
  }
  // Measured on a Zen 5 EPYC (BM_GgmlMatMul, 2048 x 2048, one thread):
  // F16 rows 30-39 GB/s through zmm, 22 GB/s through halves; F32 rows
  // 32-36 GB/s through halves, 16-27 GB/s through zmm (whether rows are
  // 64-, 32- or 16-byte aligned).
  if (f16) {
    Gemv2<true>(rows, x, k, y);
  } else {
    Gemv2Halves<false>(rows, x, k, y);
  }
}

int64_t GemmTiles512(const kernels::MatrixView& w, const float* x,
                     std::span<const uint32_t> gemm, int64_t r0, int64_t r1,
                     GgmlBuild build, float* y) {
  if (build == GgmlBuild::kAvx512) {
    const int64_t num_tiles = (r1 - r0) / TileRows<16>();
    Tiles<16>(w, x, gemm, r0, num_tiles, y);
    return r0 + num_tiles * TileRows<16>();
  }
  const int64_t num_tiles = (r1 - r0) / TileRows<8>();
  Tiles<8>(w, x, gemm, r0, num_tiles, y);
  return r0 + num_tiles * TileRows<8>();
}

int64_t GemmRowsAvx512(const kernels::GgmlGemmArgs& args, int64_t r0,
                       int64_t r1) {
  r0 = GemmTiles512(*args.w, args.x, std::span(args.tokens, args.num_tokens),
                    r0, r1, args.build, args.y);
  return r0 < r1 ? GemmRowsAvx2(args, r0, r1) : r0;
}

}  // namespace kvault::ggml_compat::dot

#pragma GCC diagnostic pop

#endif  // KVAULT_GGML_X86
