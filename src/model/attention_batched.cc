#include "model/attention_batched.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "core/float16.h"
#include "model/kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVAULT_ATTENTION_FAST 1
#endif

namespace kvault {
namespace {

constexpr uint32_t kMaxHeadDim = 256;
constexpr uint32_t kMaxGqa = 64;
constexpr uint32_t kMinHeadDimK = 32;

#ifdef KVAULT_ATTENTION_FAST
#define KV_AVX2 __attribute__((target("avx2,fma,f16c")))

// dst[i] = half(src[i]) for n fp16 values (core's row conversion, F16C).
inline void HalfToFloat8s(const std::byte* src, uint32_t n, float* dst) {
  HalfToFloatRow(std::span<const std::byte>(src, 2 * size_t{n}),
                 std::span<float>(dst, n));
}

// Rounds each value to the nearest fp16 (ties to even), as attention.cc's
// RoundToHalf.
KV_AVX2 inline __m256 RoundHalf(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// x[i] = fp16-rounded x[i] for n (a multiple of 8) values.
KV_AVX2 void RoundHalfRow(float* x, uint32_t n) {
  for (uint32_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(x + i, RoundHalf(_mm256_loadu_ps(x + i)));
  }
}

// scores[j] = k . q[j] for j < n_gqa, in ggml_vec_dot_f16's order (as
// ggml_compat::DotF16): four accumulators over 32-value steps, reduced
// (a0+a2)+(a1+a3), lanes lo+hi, two hadds, then the tail (dk % 32 values)
// in double.
KV_AVX2 void DotHeads(const float* k, const float* q, uint32_t dk,
                      uint32_t n_gqa, float* scores) {
  const uint32_t np = dk & ~31u;
  for (uint32_t j = 0; j < n_gqa; ++j) {
    const float* b = q + uint64_t{j} * dk;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (uint32_t i = 0; i < np; i += 32) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), _mm256_loadu_ps(b + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8),
                           _mm256_loadu_ps(b + i + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16),
                           _mm256_loadu_ps(b + i + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 24),
                           _mm256_loadu_ps(b + i + 24), a3);
    }
    const __m256 r =
        _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 t =
        _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    t = _mm_hadd_ps(t, t);
    t = _mm_hadd_ps(t, t);
    double sum = _mm_cvtss_f32(t);
    for (uint32_t i = np; i < dk; ++i) {
      sum += static_cast<double>(k[i] * b[i]);
    }
    scores[j] = static_cast<float>(sum);
  }
}

// For each head j: when rescale[j] != 1 (a new max), acc = round(acc *
// rescale[j]); then acc = round(fma(weight[j], v, acc)) — attention.cc's
// scale loop, RoundToHalf, AxpyF16 and RoundToHalf.
KV_AVX2 void UpdateHeads(const float* v, uint32_t dv, uint32_t n_gqa,
                         const bool* rescale, const float* old_scale,
                         const float* weight, float* out) {
  for (uint32_t j = 0; j < n_gqa; ++j) {
    float* acc = out + uint64_t{j} * dv;
    const __m256 w = _mm256_set1_ps(weight[j]);
    if (rescale[j]) {
      const __m256 s = _mm256_set1_ps(old_scale[j]);
      for (uint32_t d = 0; d < dv; d += 8) {
        const __m256 a = RoundHalf(_mm256_mul_ps(_mm256_loadu_ps(acc + d), s));
        _mm256_storeu_ps(
            acc + d, RoundHalf(_mm256_fmadd_ps(w, _mm256_loadu_ps(v + d), a)));
      }
    } else {
      for (uint32_t d = 0; d < dv; d += 8) {
        _mm256_storeu_ps(acc + d,
                         RoundHalf(_mm256_fmadd_ps(w, _mm256_loadu_ps(v + d),
                                                   _mm256_loadu_ps(acc + d))));
      }
    }
  }
}
#endif  // KVAULT_ATTENTION_FAST

}  // namespace

bool CanAttendGroupF16Fast(const AttentionShape& shape) {
#ifdef KVAULT_ATTENTION_FAST
  const std::string_view isa = kernels::ActiveIsa();
  const uint32_t n_gqa = shape.n_head / shape.n_head_kv;
  return (isa == "avx2" || isa == "avx512") && Float16UsesF16c() &&
         // Small heads (the golden-test models') stay on attention.cc's
         // path, whose numerics are tuned against llama.cpp's there.
         shape.head_dim_k >= kMinHeadDimK && shape.head_dim_k % 8 == 0 &&
         shape.head_dim_v % 8 == 0 && shape.head_dim_k <= kMaxHeadDim &&
         shape.head_dim_v <= kMaxHeadDim && n_gqa <= kMaxGqa;
#else
  (void)shape;
  return false;
#endif
}

namespace {

// One query's state in AttendBlock: its fp16-rounded heads and the online
// softmax of each head.
struct QueryState {
  const float* q = nullptr;  // [n_gqa, dk]
  float* out = nullptr;      // [n_gqa, dv]
  Pos pos = 0;
  float max[kMaxGqa];
  float sum[kMaxGqa];
};

// Queries of one sequence attended together: each cell's K/V is loaded
// once for all of them, and their independent dependency chains (the fp16
// accumulator is rounded after every cell) overlap in the core. Each
// query still sees its cells in the same order, so no bit changes.
constexpr uint32_t kQueryBlock = 4;

#ifdef KVAULT_ATTENTION_FAST
// Folds one cell into query qs: the softmax bookkeeping as in attention.cc
// (its sum fused, as llama.cpp's build fuses it), then the V update.
KV_AVX2 void FoldCell(const float* kc, const float* vc, const float* qs,
                      const AttentionShape& s, QueryState& st) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  float scores[kMaxGqa], old_scale[kMaxGqa], weight[kMaxGqa];
  bool rescale[kMaxGqa];
  DotHeads(kc, qs, s.head_dim_k, n_gqa, scores);
  for (uint32_t j = 0; j < n_gqa; ++j) {
    const float score = scores[j] * s.scale;
    old_scale[j] = 1.0f;
    weight[j] = 1.0f;
    rescale[j] = score > st.max[j];
    if (rescale[j]) {
      old_scale[j] = std::exp(st.max[j] - score);
      st.max[j] = score;
    } else {
      weight[j] = std::exp(score - st.max[j]);
    }
    st.sum[j] = std::fma(st.sum[j], old_scale[j], weight[j]);
  }
  UpdateHeads(vc, s.head_dim_v, n_gqa, rescale, old_scale, weight, st.out);
}
#endif

// Attends queries[0, n) (same sequence, KV head g). k_f32/v_f32, when not
// null, hold group g's K/V slices of seq's cells already converted
// ([cells, head_dim]).
void AttendBlock(const F16GroupRows& rows, const AttentionShape& s,
                 const SeqCells& seq, uint32_t g, const float* k_f32,
                 const float* v_f32, QueryState* queries, uint32_t n) {
#ifdef KVAULT_ATTENTION_FAST
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  const uint32_t dv = s.head_dim_v;
  thread_local std::vector<float> rounded;  // [n, n_gqa, dk] fp16-rounded
  rounded.resize(size_t{n} * n_gqa * dk);
  Pos last = queries[0].pos;
  for (uint32_t b = 0; b < n; ++b) {
    QueryState& st = queries[b];
    float* qs = &rounded[size_t{b} * n_gqa * dk];
    std::memcpy(qs, st.q, sizeof(float) * n_gqa * dk);
    RoundHalfRow(qs, n_gqa * dk);
    std::fill(st.max, st.max + n_gqa, -INFINITY);
    std::fill(st.sum, st.sum + n_gqa, 0.0f);
    std::memset(st.out, 0, sizeof(float) * n_gqa * dv);
    last = std::max(last, st.pos);
  }
  float k[kMaxHeadDim], v[kMaxHeadDim];
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    if (seq.positions[i] > last) continue;  // causal mask for every query
    const float* kc = k;
    const float* vc = v;
    if (k_f32 != nullptr) {
      kc = k_f32 + i * dk;
      vc = v_f32 + i * dv;
    } else {
      const uint64_t cell = seq.cells[i].value();
      HalfToFloat8s(
          rows.k_base + cell * rows.k_row_bytes + uint64_t{g} * dk * 2, dk, k);
      HalfToFloat8s(
          rows.v_base + cell * rows.v_row_bytes + uint64_t{g} * dv * 2, dv, v);
    }
    for (uint32_t b = 0; b < n; ++b) {
      if (seq.positions[i] > queries[b].pos) continue;
      FoldCell(kc, vc, &rounded[size_t{b} * n_gqa * dk], s, queries[b]);
    }
  }
  for (uint32_t b = 0; b < n; ++b) {
    for (uint32_t j = 0; j < n_gqa; ++j) {
      const float sum = queries[b].sum[j];
      const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
      float* o = queries[b].out + uint64_t{j} * dv;
      for (uint32_t d = 0; d < dv; ++d) o[d] *= inv;
    }
  }
#else
  (void)rows, (void)s, (void)seq, (void)g, (void)k_f32, (void)v_f32,
      (void)queries, (void)n;
#endif
}

// Converts group g's K (or V) slices of seq's cells, in logical order, into
// dst [cells, head_dim]: done once per prefill sequence instead of once per
// query. The conversion is exact, so results do not change.
void GatherSlices(const std::byte* base, uint64_t row_bytes, uint32_t g,
                  uint32_t head_dim, const SeqCells& seq, float* dst) {
#ifdef KVAULT_ATTENTION_FAST
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    HalfToFloat8s(
        base + seq.cells[i].value() * row_bytes + uint64_t{g} * head_dim * 2,
        head_dim, dst + i * head_dim);
  }
#else
  (void)base, (void)row_bytes, (void)g, (void)head_dim, (void)seq, (void)dst;
#endif
}

}  // namespace

void AttendGroupF16Fast(const F16GroupRows& rows, const AttentionShape& shape,
                        const SeqCells& seq, Pos query_pos, uint32_t g,
                        const float* q, float* out) {
  QueryState st;
  st.q = q;
  st.out = out;
  st.pos = query_pos;
  AttendBlock(rows, shape, seq, g, nullptr, nullptr, &st, 1);
}

void AttendF16Fast(
    const F16GroupRows& rows, const AttentionShape& shape,
    std::span<const SeqCells> seqs, std::span<const uint32_t> seq_of,
    std::span<const Pos> query_pos, const float* q, float* out,
    const std::function<void(size_t, const std::function<void(size_t)>&)>&
        run) {
  const uint32_t n_kv = shape.n_head_kv;
  const uint32_t dk = shape.head_dim_k;
  const uint32_t dv = shape.head_dim_v;
  // Sequences with several queries in the batch (a prefill) get their K/V
  // converted once: [n_head_kv, cells, dk] then [n_head_kv, cells, dv].
  std::vector<uint32_t> num_queries(seqs.size(), 0);
  for (uint32_t s : seq_of) ++num_queries[s];
  std::vector<std::vector<float>> gathered(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (num_queries[s] < 2) continue;
    const size_t n = seqs[s].cells.size();
    gathered[s].resize(size_t{n_kv} * n * (dk + dv));
    for (uint32_t g = 0; g < n_kv; ++g) {
      GatherSlices(rows.k_base, rows.k_row_bytes, g, dk, seqs[s],
                   &gathered[s][size_t{g} * n * dk]);
      GatherSlices(rows.v_base, rows.v_row_bytes, g, dv, seqs[s],
                   &gathered[s][size_t{n_kv} * n * dk + size_t{g} * n * dv]);
    }
  }
  // Blocks of up to kQueryBlock consecutive batch tokens of one sequence.
  std::vector<std::pair<uint32_t, uint32_t>> blocks;  // [first, end) tokens
  for (uint32_t t = 0; t < seq_of.size();) {
    uint32_t e = t + 1;
    while (e < seq_of.size() && e - t < kQueryBlock && seq_of[e] == seq_of[t]) {
      ++e;
    }
    blocks.emplace_back(t, e);
    t = e;
  }
  const uint32_t n_gqa = shape.n_head / n_kv;
  const uint64_t q_stride = uint64_t{shape.n_head} * dk;
  const uint64_t out_stride = uint64_t{shape.n_head} * dv;
  run(blocks.size() * n_kv, [&](size_t index) {
    const auto [first, end] = blocks[index / n_kv];
    const uint32_t g = static_cast<uint32_t>(index % n_kv);
    const uint64_t first_head = uint64_t{g} * n_gqa;
    const uint32_t s = seq_of[first];
    const float* k_f32 = nullptr;
    const float* v_f32 = nullptr;
    if (!gathered[s].empty()) {
      const size_t n = seqs[s].cells.size();
      k_f32 = &gathered[s][size_t{g} * n * dk];
      v_f32 = &gathered[s][size_t{n_kv} * n * dk + size_t{g} * n * dv];
    }
    QueryState queries[kQueryBlock];
    for (uint32_t t = first; t < end; ++t) {
      QueryState& st = queries[t - first];
      st.q = q + t * q_stride + first_head * dk;
      st.out = out + t * out_stride + first_head * dv;
      st.pos = query_pos[t];
    }
    AttendBlock(rows, shape, seqs[s], g, k_f32, v_f32, queries, end - first);
  });
}

}  // namespace kvault
