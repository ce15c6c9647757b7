#include "model/attention_tiled.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/attention_simd.h"
#include "model/attention_simd512.h"

namespace kvault {

bool PositionsIncrease(const SeqCells& seq) {
  for (size_t i = 1; i < seq.positions.size(); ++i) {
    if (seq.positions[i] <= seq.positions[i - 1]) return false;
  }
  return true;
}

uint32_t TiledTokensPerTask(const AttentionShape& shape) {
  // A task converts each cell block's K/V once for all its rows: 128 rows
  // rather than 64 halve that cost (small Q8_0, pp512 at depth 4,096:
  // 1,087-1,145 tok/s against 1,034-1,056) and still give a 512-token
  // prompt 8 tasks per KV head.
  constexpr uint32_t kRowsPerTask = 128;
  const uint32_t n_gqa = shape.n_head / shape.n_head_kv;
  return std::max(1u, kRowsPerTask / n_gqa);
}

#ifdef KVAULT_ATTENTION_FAST
namespace {

using namespace attention_simd;  // NOLINT: this file's vocabulary

// Cells per block: one block's K and V slices in f32 (64 x 64 x 4 B each
// at head size 64) stay in L1 and L2 while the query block uses them.
constexpr uint32_t kBlock = 64;

// One task's working memory, reused across tasks on a thread.
struct TileScratch {
  std::vector<float> qs;              // [rows, dk] fp16-rounded queries
  std::vector<uint32_t> visible;      // [tokens] cells each token sees
  std::vector<SoftmaxState> state;    // [rows]
  std::vector<float> acc;             // [rows, dv] V accumulators
  std::vector<float> kblock, vblock;  // [kBlock, dk], [kBlock, dv]
  std::vector<float> kcols;  // [dk, kBlock]: kblock transposed, dk < 32
  std::vector<const float*> krows, vrows;  // [kBlock] into the blocks
  std::vector<float> scores;          // [rows, kBlock]
  std::vector<CellTerms> terms;       // [rows, kBlock]
  std::vector<float> exps;            // [4 kBlock]
};

// dst[i] = half(src[i]) for i < n (a multiple of 8): exact.
KV_AVX2 inline void HalfToFloat8s(const std::byte* src, uint32_t n,
                                  float* dst) {
  for (uint32_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(dst + i, Load8(reinterpret_cast<const uint16_t*>(src) + i));
  }
}

// Converts group g's K and V slices of cells [m0, m0 + n) of seq to f32
// (exact), and prefetches the next block's slices.
KV_AVX2 void ConvertBlock(const F16GroupRows& rows, const AttentionShape& s,
                  const SeqCells& seq, uint32_t g, uint32_t m0, uint32_t n,
                  uint32_t end, TileScratch& t) {
  const size_t k_bytes = size_t{s.head_dim_k} * 2;
  const size_t v_bytes = size_t{s.head_dim_v} * 2;
  const std::byte* k_base = rows.k_base + g * k_bytes;
  const std::byte* v_base = rows.v_base + g * v_bytes;
  for (uint32_t c = m0 + n; c < std::min(end, m0 + n + kBlock); ++c) {
    const uint64_t cell = seq.cells[c].value();
    PrefetchRow(k_base + cell * rows.k_row_bytes, k_bytes);
    PrefetchRow(v_base + cell * rows.v_row_bytes, v_bytes);
  }
  for (uint32_t c = 0; c < n; ++c) {
    const uint64_t cell = seq.cells[m0 + c].value();
    HalfToFloat8s(k_base + cell * rows.k_row_bytes, s.head_dim_k,
                  &t.kblock[size_t{c} * s.head_dim_k]);
    HalfToFloat8s(v_base + cell * rows.v_row_bytes, s.head_dim_v,
                  &t.vblock[size_t{c} * s.head_dim_v]);
  }
  if (s.head_dim_k >= 32) return;
  for (uint32_t c = 0; c < n; ++c) {
    for (uint32_t i = 0; i < s.head_dim_k; ++i) {
      t.kcols[size_t{i} * kBlock + c] = t.kblock[size_t{c} * s.head_dim_k + i];
    }
  }
}

// scores[c] = DotOne(K row c, q, dk) for c < n (a multiple of 8), dk < 32:
// DotOne then sums every product in double, in order, from +0; here 8
// cells' sums run in vector lanes over the transposed block.
KV_AVX2 void ScoreColumns(const TileScratch& t, const float* q, uint32_t dk,
                          uint32_t n, float* scores) {
  for (uint32_t c = 0; c < n; c += 8) {
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    for (uint32_t i = 0; i < dk; ++i) {
      const __m256 p = _mm256_mul_ps(
          _mm256_loadu_ps(&t.kcols[size_t{i} * kBlock + c]),
          _mm256_set1_ps(q[i]));
      lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
      hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    _mm256_storeu_ps(scores + c, _mm256_set_m128(_mm256_cvtpd_ps(hi),
                                                 _mm256_cvtpd_ps(lo)));
  }
}

// scores[c] = K row c of the block . q for c < n (DotOne's sums). Under
// 32 values both builds' orders sum every product in the double tail.
template <bool kDot512>
KV_AVX2 void ScoreRow(const TileScratch& t, const float* q, uint32_t dk,
                      uint32_t n, float* scores) {
  uint32_t c = 0;
  if (dk % kDotStep<kDot512> == 0) {
    for (; c + 8 <= n; c += 8) {
      Dot8Keys<kDot512>(&t.krows[c], q, dk, scores + c, 1);
    }
  } else if (dk < 32) {
    c = n & ~7u;
    ScoreColumns(t, q, dk, c, scores);
  }
  for (; c < n; ++c) scores[c] = DotOne<kDot512>(t.krows[c], q, dk);
}

// ScoreRow for two queries (q: [2, dk]; scores: [2, kBlock]), each K
// vector loaded once for both; dk a multiple of kDotStep.
template <bool kDot512>
KV_AVX2 void ScoreRows2(const TileScratch& t, const float* q, uint32_t dk,
                        uint32_t n, float* scores) {
  uint32_t c = 0;
  for (; c + 8 <= n; c += 8) {
    Dot8Keys2<kDot512>(&t.krows[c], q, q + dk, dk, scores + c,
                       scores + kBlock + c);
  }
  for (; c < n; ++c) {
    scores[c] = DotOne<kDot512>(t.krows[c], q, dk);
    scores[kBlock + c] = DotOne<kDot512>(t.krows[c], q + dk, dk);
  }
}

// ScoreRows2 with AVX-512 at head size kDk: 16 cells per Dot16Keys2 call,
// the rest as ScoreRows2 does them.
template <bool kDot512, uint32_t kDk>
KV_AVX512 void ScoreRows2Wide(const TileScratch& t, const float* q, uint32_t n,
                              float* scores) {
  uint32_t c = 0;
  for (; c + 16 <= n; c += 16) {
    Dot16Keys2<kDot512, kDk>(&t.krows[c], q, q + kDk, scores + c,
                             scores + kBlock + c);
  }
  for (; c < n; ++c) {
    scores[c] = DotOne<kDot512>(t.krows[c], q, kDk);
    scores[kBlock + c] = DotOne<kDot512>(t.krows[c], q + kDk, kDk);
  }
}

// Loads the task's queries (fp16-rounded) and each token's visible count.
KV_AVX2 void LoadQueries(const AttentionShape& s, const SeqCells& seq,
                         std::span<const uint32_t> tokens,
                         std::span<const Pos> query_pos, uint32_t g,
                         const float* q, TileScratch& t) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  const size_t group_width = size_t{n_gqa} * dk;
  t.qs.resize(tokens.size() * group_width);
  t.visible.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* src = q + size_t{tokens[i]} * s.n_head * dk + g * group_width;
    std::memcpy(&t.qs[i * group_width], src, group_width * sizeof(float));
    const Pos pos = query_pos[tokens[i]];
    t.visible[i] = static_cast<uint32_t>(
        std::upper_bound(seq.positions.begin(), seq.positions.end(), pos) -
        seq.positions.begin());
  }
  RoundHalfRow(t.qs.data(), static_cast<uint32_t>(t.qs.size()));
}

// The scores of token i's heads over the current block's first n cells,
// in the order of ggml_vec_dot_f16 of an AVX-512 build (kDot512) or of an
// AVX2 one.
template <bool kDot512>
KV_AVX2 void TokenScoresIn(const AttentionShape& s, size_t i, uint32_t n,
                           bool two_at_once, TileScratch& t) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  uint32_t j = 0;
  for (; dk % kDotStep<kDot512> == 0 && j + 2 <= n_gqa; j += 2) {
    const size_t r = i * n_gqa + j;
    const float* q = &t.qs[r * dk];
    float* scores = &t.scores[r * kBlock];
    if (two_at_once && dk == 64) {
      ScoreRows2Wide<kDot512, 64>(t, q, n, scores);
    } else if (two_at_once && dk == 128) {
      ScoreRows2Wide<kDot512, 128>(t, q, n, scores);
    } else {
      ScoreRows2<kDot512>(t, q, dk, n, scores);
    }
  }
  for (; j < n_gqa; ++j) {
    const size_t r = i * n_gqa + j;
    ScoreRow<kDot512>(t, &t.qs[r * dk], dk, n, &t.scores[r * kBlock]);
  }
}

// TokenScoresIn in the order `mode` names.
KV_AVX2 void TokenScores(const AttentionShape& s, size_t i, uint32_t n,
                         const F16AttendMode& mode, TileScratch& t) {
  if (mode.dot512) return TokenScoresIn<true>(s, i, n, mode.two_at_once, t);
  TokenScoresIn<false>(s, i, n, mode.two_at_once, t);
}

// Runs token i's heads over the current block's first n cells.
KV_AVX2 void TokenBlock(const AttentionShape& s, size_t i, uint32_t n,
                        const F16AttendMode& mode, TileScratch& t) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dv = s.head_dim_v;
  const bool two_at_once = mode.two_at_once;
  TokenScores(s, i, n, mode, t);
  if (dv == 64 && two_at_once) return;  // SoftmaxBlock's, AccumulateBlock64's
  uint32_t j = 0;
  for (; j + 2 <= n_gqa; j += 2) {
    const size_t r = i * n_gqa + j;
    if (two_at_once) {
      SoftmaxTermsRowsWide(2, &t.scores[r * kBlock], kBlock, n, s.scale,
                           &t.state[r], t.exps.data(), &t.terms[r * kBlock],
                           kBlock);
    } else {
      SoftmaxTermsRows2(&t.scores[r * kBlock], kBlock, n, s.scale,
                        &t.state[r], t.exps.data(), &t.terms[r * kBlock],
                        kBlock);
    }
  }
  for (; j < n_gqa; ++j) {
    const size_t r = i * n_gqa + j;
    SoftmaxTermsRow(&t.scores[r * kBlock], 1, n, s.scale, &t.state[r],
                    t.exps.data(), &t.terms[r * kBlock]);
  }
  AccumulateHeads(t.vrows.data(), n, n_gqa, dv, two_at_once,
                  &t.terms[i * n_gqa * kBlock], kBlock, &t.acc[i * n_gqa * dv],
                  dv);
}

// The block's softmax terms at head size 64 with AVX-512: runs of rows
// that see the same cells (the heads of consecutive tokens) go up to four
// at a time, so four rows' serial sum chains overlap.
KV_AVX512 void SoftmaxBlock(float scale, uint32_t n_gqa, uint32_t m0,
                            uint32_t n, size_t num_tokens, TileScratch& t) {
  size_t first = 0;
  uint32_t count = 0, width = 0;  // rows gathered from `first`; their cells
  auto flush = [&] {
    for (uint32_t done = 0; done < count;) {
      const uint32_t left = count - done;
      const int rows = left >= 4 ? 4 : left >= 2 ? 2 : 1;
      const size_t r = first + done;
      SoftmaxTermsRowsWide(rows, &t.scores[r * kBlock], kBlock, width, scale,
                           &t.state[r], t.exps.data(), &t.terms[r * kBlock],
                           kBlock);
      done += rows;
    }
    count = 0;
  };
  for (size_t i = 0; i < num_tokens; ++i) {
    if (t.visible[i] <= m0) continue;
    const uint32_t cells = std::min(n, t.visible[i] - m0);
    const size_t r = i * n_gqa;
    if (count > 0 && (cells != width || r != first + count)) flush();
    if (count == 0) first = r;
    count += n_gqa;
    width = cells;
  }
  if (count > 0) flush();
}

// Rows per V pass. The pass is bound by its fp16 round trips
// (vcvtps2ph, vcvtph2ps), not by their latency: 6 rows ran slower than 4
// (small Q8_0, pp512 at depth 4,096: 1,047-1,063 tok/s against
// 1,196-1,250).
constexpr uint32_t kVRows = 4;

// The block's V accumulations at head size 64 with AVX-512: runs of four
// rows (heads of one or two tokens) that see the same cells go through
// AccumulateRows64<4> together, the rest two or one at a time.
KV_AVX512 void AccumulateBlock64(uint32_t n_gqa, uint32_t m0, uint32_t n,
                                 size_t num_tokens, TileScratch& t) {
  const CellTerms* terms[kVRows];
  float* out[kVRows];
  uint32_t count = 0, width = 0;  // rows gathered; cells they see
  auto flush = [&] {
    uint32_t r = 0;
    if (count == kVRows) {
      AccumulateRows64<kVRows>(t.vrows.data(), width, terms, out);
      r = count;
    }
    for (; r + 2 <= count; r += 2) {
      AccumulateRows64<2>(t.vrows.data(), width, &terms[r], &out[r]);
    }
    for (; r < count; ++r) {
      AccumulateRows64<1>(t.vrows.data(), width, &terms[r], &out[r]);
    }
    count = 0;
  };
  for (size_t i = 0; i < num_tokens; ++i) {
    if (t.visible[i] <= m0) continue;
    const uint32_t cells = std::min(n, t.visible[i] - m0);
    for (uint32_t j = 0; j < n_gqa; ++j) {
      if (count > 0 && cells != width) flush();
      const size_t r = i * n_gqa + j;
      terms[count] = &t.terms[r * kBlock];
      out[count++] = &t.acc[r * 64];
      width = cells;
      if (count == kVRows) flush();
    }
  }
  if (count > 0) flush();
}

void ResizeScratch(const AttentionShape& s, size_t rows, TileScratch& t) {
  t.state.assign(rows, SoftmaxState{});
  t.acc.assign(rows * s.head_dim_v, 0.0f);
  t.kblock.resize(size_t{kBlock} * s.head_dim_k);
  t.kcols.resize(size_t{kBlock} * s.head_dim_k);
  t.vblock.resize(size_t{kBlock} * s.head_dim_v);
  t.krows.resize(kBlock);
  t.vrows.resize(kBlock);
  for (uint32_t c = 0; c < kBlock; ++c) {
    t.krows[c] = &t.kblock[size_t{c} * s.head_dim_k];
    t.vrows[c] = &t.vblock[size_t{c} * s.head_dim_v];
  }
  t.scores.resize(rows * kBlock);
  t.terms.resize(rows * kBlock);
  t.exps.resize(4 * kBlock);
}

}  // namespace
#endif  // KVAULT_ATTENTION_FAST

void AttendTile(const F16GroupRows& rows, const AttentionShape& s,
                const SeqCells& seq, std::span<const uint32_t> tokens,
                std::span<const Pos> query_pos, uint32_t g,
                const F16AttendMode& mode, const float* q, float* out) {
#ifdef KVAULT_ATTENTION_FAST
  const bool two_at_once = mode.two_at_once;
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dv = s.head_dim_v;
  thread_local TileScratch t;
  LoadQueries(s, seq, tokens, query_pos, g, q, t);
  ResizeScratch(s, tokens.size() * n_gqa, t);
  const uint32_t end = *std::max_element(t.visible.begin(), t.visible.end());
  for (uint32_t m0 = 0; m0 < end; m0 += kBlock) {
    const uint32_t n = std::min(kBlock, end - m0);
    ConvertBlock(rows, s, seq, g, m0, n, end, t);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (t.visible[i] <= m0) continue;  // causal mask: nothing here
      TokenBlock(s, i, std::min(n, t.visible[i] - m0), mode, t);
    }
    if (dv == 64 && two_at_once) {
      SoftmaxBlock(s.scale, n_gqa, m0, n, tokens.size(), t);
      AccumulateBlock64(n_gqa, m0, n, tokens.size(), t);
    }
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (uint32_t j = 0; j < n_gqa; ++j) {
      const size_t r = i * n_gqa + j;
      float* dst = out + size_t{tokens[i]} * s.n_head * dv +
                   (size_t{g} * n_gqa + j) * dv;
      std::memcpy(dst, &t.acc[r * dv], dv * sizeof(float));
      Normalize(t.state[r].sum, dv, dst);
    }
  }
#else
  (void)rows, (void)s, (void)seq, (void)tokens, (void)query_pos, (void)g,
      (void)mode, (void)q, (void)out;
#endif
}

}  // namespace kvault
