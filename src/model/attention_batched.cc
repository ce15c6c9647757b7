#include "model/attention_batched.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
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
// AVX2 code with 32 ymm registers, for machines whose kernel table is
// AVX-512's.
#define KV_AVX512VL __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

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

// 8 values of a K or V row as f32: rows gathered to f32 for a prefill, or
// fp16 rows read in place from the pool for a decode (exact conversion, so
// both give the same sums).
KV_AVX2 inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
KV_AVX2 inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float LoadOne(const float* p) { return *p; }
inline float LoadOne(const uint16_t* p) { return HalfToFloat(*p); }

// The 8 lanes (a0+a2)+(a1+a3) of ggml_vec_dot_f16's four accumulators
// over values [0, np) of a . b (np a multiple of 32).
template <class T>
KV_AVX2 inline __m256 DotLanes(const T* a, const float* b, uint32_t np) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (uint32_t i = 0; i < np; i += 32) {
    a0 = _mm256_fmadd_ps(Load8(a + i), _mm256_loadu_ps(b + i), a0);
    a1 = _mm256_fmadd_ps(Load8(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
    a2 = _mm256_fmadd_ps(Load8(a + i + 16), _mm256_loadu_ps(b + i + 16), a2);
    a3 = _mm256_fmadd_ps(Load8(a + i + 24), _mm256_loadu_ps(b + i + 24), a3);
  }
  return _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
}

// scores[j] = k . q[j] for j < n_gqa, in ggml_vec_dot_f16's order (as
// ggml_compat::DotF16): four accumulators over 32-value steps, reduced
// (a0+a2)+(a1+a3), lanes lo+hi, two hadds, then the tail (dk % 32 values)
// in double.
template <class T>
KV_AVX2 void DotHeads(const T* k, const float* q, uint32_t dk,
                      uint32_t n_gqa, float* scores) {
  const uint32_t np = dk & ~31u;
  for (uint32_t j = 0; j < n_gqa; ++j) {
    const float* b = q + uint64_t{j} * dk;
    const __m256 r = DotLanes(k, b, np);
    __m128 t =
        _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    t = _mm_hadd_ps(t, t);
    t = _mm_hadd_ps(t, t);
    double sum = _mm_cvtss_f32(t);
    for (uint32_t i = np; i < dk; ++i) {
      sum += static_cast<double>(LoadOne(k + i) * b[i]);
    }
    scores[j] = static_cast<float>(sum);
  }
}

// scores[m * stride] = keys[m] . q for m < 8, dk a multiple of 32: the
// same sums as DotHeads, whose per-key horizontal reduction
// ((r0+r4)+(r1+r5)) + ((r2+r6)+(r3+r7)) is done here for 8 keys at once
// with lane shuffles and two hadds instead of a serial chain per key.
template <class T>
KV_AVX2 void Dot8Keys(const T* const* keys, const float* q, uint32_t dk,
                      float* scores, size_t stride) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) r[m] = DotLanes(keys[m], q, dk);
  // t[p] = [lo + hi of key 2p | lo + hi of key 2p + 1].
  __m256 t[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[p] = _mm256_add_ps(_mm256_permute2f128_ps(r[2 * p], r[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(r[2 * p], r[2 * p + 1], 0x31));
  }
  // Lanes: keys 0, 2, 4, 6 | 1, 3, 5, 7.
  const __m256 h =
      _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
  alignas(32) float out[8];
  _mm256_store_ps(out, h);
  constexpr int kKeyOfLane[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int l = 0; l < 8; ++l) scores[kKeyOfLane[l] * stride] = out[l];
}

// Fetches `row` (`bytes` long) into the L2 cache ahead of its use: the
// cells of a fragmented sequence sit anywhere in the pool, where the
// hardware prefetchers cannot follow. Into L2, not L1: the loops fetch
// dozens of cells ahead, more than L1's miss buffers hold (Zen 4,
// BM_AttentionDecode/0/4: 15.9 ms with T0 hints at these distances, 8.6
// ms with T1). No AVX2 target and always inlined: GCC takes an out-of-line
// function of prefetches alone for one without effects and deletes the
// calls, as it did GatherSlices's, which could not inline an AVX2 one.
template <class T>
__attribute__((always_inline)) inline void PrefetchRow(const T* row,
                                                       size_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
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

// One query: its heads, where its output goes, and its position.
struct QueryState {
  const float* q = nullptr;  // [n_gqa, dk]
  float* out = nullptr;      // [n_gqa, dv]
  Pos pos = 0;
};

#ifdef KVAULT_ATTENTION_FAST
// One cell's softmax terms for one head: the accumulator is first scaled
// by old_scale when rescale (a new running max), then gets weight * v.
struct CellTerms {
  float weight;
  float old_scale;
  bool rescale;
};

// The online-softmax bookkeeping of head j over n cells' scores
// ([n, n_gqa]) in cell order, as attention.cc does it (its sum fused, as
// llama.cpp's build fuses it). Fills terms[0, n); returns the final sum.
KV_AVX2 float SoftmaxTerms(const float* scores, uint32_t n, uint32_t n_gqa,
                           uint32_t j, float scale, CellTerms* terms) {
  float max = -INFINITY;
  float sum = 0.0f;
  for (uint32_t m = 0; m < n; ++m) {
    const float score = scores[size_t{m} * n_gqa + j] * scale;
    CellTerms& c = terms[m];
    c.weight = 1.0f;
    c.old_scale = 1.0f;
    c.rescale = score > max;
    if (c.rescale) {
      c.old_scale = std::exp(max - score);
      max = score;
    } else {
      c.weight = std::exp(score - max);
    }
    sum = std::fma(sum, c.old_scale, c.weight);
  }
  return sum;
}

// Cells whose rows are fetched ahead of the loops that read them: far
// enough for a DRAM access to complete before the loop gets there.
constexpr uint32_t kPrefetchCells = 32;
// The V loops run one latency-bound chain step per cell (~4x slower per
// cell than the score loop), so they fetch further ahead in cells.
constexpr uint32_t kPrefetchVCells = 64;

// out[0, 8 kNv) = the fp16-rounded V accumulation over rows[0, n) ([dv]
// each), the accumulator held in registers: its chain (fma, round, round
// per cell) is the loop's critical path.
template <int kNv, class T>
KV_AVX2 void AccumulateV(const T* const* rows, uint32_t n,
                         const CellTerms* terms, float* out) {
  __m256 acc[kNv];
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) acc[d] = _mm256_setzero_ps();
  for (uint32_t m = 0; m < n; ++m) {
    if (m + kPrefetchVCells < n) {
      PrefetchRow(rows[m + kPrefetchVCells], sizeof(T) * 8 * kNv);
    }
    const T* vc = rows[m];
    const __m256 w = _mm256_set1_ps(terms[m].weight);
    if (terms[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        const __m256 a = RoundHalf(_mm256_mul_ps(acc[d], sc));
        acc[d] = RoundHalf(_mm256_fmadd_ps(w, Load8(vc + 8 * d), a));
      }
    } else {
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc[d] = RoundHalf(_mm256_fmadd_ps(w, Load8(vc + 8 * d), acc[d]));
      }
    }
  }
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) _mm256_storeu_ps(out + 8 * d, acc[d]);
}

// AccumulateV for two heads of one group at once (same V rows, own terms
// and outputs): two independent chains per cell instead of one, so the
// core overlaps them. Each lane sees AccumulateV's operations (a rescale's
// RoundHalf(acc * old_scale) is only moved ahead of the fma), so the bits
// are the same. 2 x kNv accumulators need AVX-512VL's 32 registers.
template <int kNv, class T>
KV_AVX512VL void AccumulateV2(const T* const* rows, uint32_t n,
                              const CellTerms* terms0,
                              const CellTerms* terms1, float* out0,
                              float* out1) {
  __m256 acc0[kNv], acc1[kNv];
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) acc0[d] = acc1[d] = _mm256_setzero_ps();
  for (uint32_t m = 0; m < n; ++m) {
    if (m + kPrefetchVCells < n) {
      PrefetchRow(rows[m + kPrefetchVCells], sizeof(T) * 8 * kNv);
    }
    if (terms0[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms0[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc0[d] = RoundHalf(_mm256_mul_ps(acc0[d], sc));
      }
    }
    if (terms1[m].rescale) {
      const __m256 sc = _mm256_set1_ps(terms1[m].old_scale);
#pragma GCC unroll 16
      for (int d = 0; d < kNv; ++d) {
        acc1[d] = RoundHalf(_mm256_mul_ps(acc1[d], sc));
      }
    }
    const T* vc = rows[m];
    const __m256 w0 = _mm256_set1_ps(terms0[m].weight);
    const __m256 w1 = _mm256_set1_ps(terms1[m].weight);
#pragma GCC unroll 16
    for (int d = 0; d < kNv; ++d) {
      const __m256 v = Load8(vc + 8 * d);
      acc0[d] = RoundHalf(_mm256_fmadd_ps(w0, v, acc0[d]));
      acc1[d] = RoundHalf(_mm256_fmadd_ps(w1, v, acc1[d]));
    }
  }
#pragma GCC unroll 16
  for (int d = 0; d < kNv; ++d) {
    _mm256_storeu_ps(out0 + 8 * d, acc0[d]);
    _mm256_storeu_ps(out1 + 8 * d, acc1[d]);
  }
}

// AccumulateV for any dv (a multiple of 8), the accumulator in out: per
// cell, on a rescale acc = round(acc * old_scale), then acc = round(fma(
// weight, v, acc)) — attention.cc's scale loop, RoundToHalf, AxpyF16 and
// RoundToHalf.
template <class T>
KV_AVX2 void AccumulateVAny(const T* const* rows, uint32_t dv, uint32_t n,
                            const CellTerms* terms, float* out) {
  std::memset(out, 0, sizeof(float) * dv);
  for (uint32_t m = 0; m < n; ++m) {
    const __m256 w = _mm256_set1_ps(terms[m].weight);
    const __m256 s = _mm256_set1_ps(terms[m].old_scale);
    for (uint32_t d = 0; d < dv; d += 8) {
      __m256 acc = _mm256_loadu_ps(out + d);
      if (terms[m].rescale) acc = RoundHalf(_mm256_mul_ps(acc, s));
      _mm256_storeu_ps(out + d,
                       RoundHalf(_mm256_fmadd_ps(w, Load8(rows[m] + d), acc)));
    }
  }
}

// out[j] ([n_gqa, dv]) = head j's V accumulation over rows[0, n) with its
// terms (terms[j * n, (j + 1) * n)), divided by its softmax sum sums[j].
template <class T>
KV_AVX2 void AccumulateHeads(const T* const* rows, uint32_t n, uint32_t n_gqa,
                             uint32_t dv, const CellTerms* terms,
                             const float* sums, float* out) {
  uint32_t j = 0;
  if (dv == 64 && kernels::ActiveIsa() == "avx512") {
    for (; j + 2 <= n_gqa; j += 2) {
      AccumulateV2<8>(rows, n, &terms[size_t{j} * n],
                      &terms[size_t{j + 1} * n], out + size_t{j} * dv,
                      out + size_t{j + 1} * dv);
    }
  }
  for (; j < n_gqa; ++j) {
    const CellTerms* head_terms = &terms[size_t{j} * n];
    float* head_out = out + size_t{j} * dv;
    if (dv == 64) {
      AccumulateV<8>(rows, n, head_terms, head_out);
    } else if (dv == 128) {
      AccumulateV<16>(rows, n, head_terms, head_out);
    } else {
      AccumulateVAny(rows, dv, n, head_terms, head_out);
    }
  }
  for (j = 0; j < n_gqa; ++j) {
    const float inv = sums[j] == 0.0f ? 0.0f : 1.0f / sums[j];
    float* head_out = out + size_t{j} * dv;
    for (uint32_t d = 0; d < dv; ++d) head_out[d] *= inv;
  }
}

// Where one KV head's K (or V) slices are: the slice of the sequence's
// i-th cell at base + index * stride, index = cells[i] for slices read in
// place from the pool (fp16, a decode), i for ones gathered to f32 (a
// prefill; cells null).
template <class T>
struct SliceRows {
  const std::byte* base = nullptr;
  uint64_t stride = 0;
  const CellId* cells = nullptr;

  const T* Row(size_t i) const {
    const uint64_t index = cells == nullptr ? i : cells[i].value();
    return reinterpret_cast<const T*>(base + index * stride);
  }
};

// Attends one query over the cells of seq with positions <= st.pos, whose
// K/V slices of one group are k ([dk] each) and v ([dv] each).
// Three passes: every cell's scores (independent, so they overlap in the
// core), each head's softmax terms, then each head's V accumulation.
template <class T>
KV_AVX2 void AttendQuery(const AttentionShape& s, const SeqCells& seq,
                         const SliceRows<T>& k, const SliceRows<T>& v,
                         const QueryState& st) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  const uint32_t dv = s.head_dim_v;
  thread_local std::vector<float> qs;          // [n_gqa, dk] fp16-rounded
  thread_local std::vector<const T*> krows;    // attended cells, in order
  thread_local std::vector<const T*> vrows;
  thread_local std::vector<float> scores;      // [cells, n_gqa]
  thread_local std::vector<CellTerms> terms;   // [n_gqa, cells]
  qs.assign(st.q, st.q + size_t{n_gqa} * dk);
  RoundHalfRow(qs.data(), n_gqa * dk);
  const size_t num_cells = seq.cells.size();
  krows.resize(num_cells);
  vrows.resize(num_cells);
  scores.resize(num_cells * n_gqa);
  terms.resize(num_cells * n_gqa);
  uint32_t n = 0;
  for (size_t i = 0; i < num_cells; ++i) {
    if (seq.positions[i] > st.pos) continue;  // causal mask
    krows[n] = k.Row(i);
    vrows[n++] = v.Row(i);
  }
  uint32_t m = 0;
  if (dk % 32 == 0) {
    for (; m + 8 <= n; m += 8) {
      const uint32_t end = std::min(n, m + kPrefetchCells + 8);
      for (uint32_t a = m + kPrefetchCells; a < end; ++a) {
        PrefetchRow(krows[a], sizeof(T) * dk);
      }
      for (uint32_t j = 0; j < n_gqa; ++j) {
        Dot8Keys(&krows[m], &qs[size_t{j} * dk], dk,
                 &scores[size_t{m} * n_gqa + j], n_gqa);
      }
    }
  }
  for (; m < n; ++m) {
    DotHeads(krows[m], qs.data(), dk, n_gqa, &scores[size_t{m} * n_gqa]);
  }
  // The V loop fetches kPrefetchVCells ahead of itself; its first cells
  // arrive while the softmax runs.
  for (uint32_t i = 0; i < std::min(n, kPrefetchVCells); ++i) {
    PrefetchRow(vrows[i], sizeof(T) * dv);
  }
  thread_local std::vector<float> sums;  // [n_gqa]
  sums.resize(n_gqa);
  for (uint32_t j = 0; j < n_gqa; ++j) {
    sums[j] = SoftmaxTerms(scores.data(), n, n_gqa, j, s.scale,
                           &terms[size_t{j} * n]);
  }
  AccumulateHeads(vrows.data(), n, n_gqa, dv, terms.data(), sums.data(),
                  st.out);
}
#endif

// Converts group g's K (or V) slices of seq's cells, in logical order, into
// dst [cells, head_dim]: done once per prefill sequence instead of once per
// query. The conversion is exact, so results do not change.
void GatherSlices(const std::byte* base, uint64_t row_bytes, uint32_t g,
                  uint32_t head_dim, const SeqCells& seq, float* dst) {
#ifdef KVAULT_ATTENTION_FAST
  const size_t slice_bytes = size_t{head_dim} * 2;
  const uint64_t offset = uint64_t{g} * slice_bytes;
  const SliceRows<std::byte> slices{base + offset, row_bytes,
                                    seq.cells.data()};
  const size_t n = seq.cells.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchCells < n) {
      PrefetchRow(slices.Row(i + kPrefetchCells), slice_bytes);
    }
    HalfToFloat8s(slices.Row(i), head_dim, dst + i * head_dim);
  }
#else
  (void)base, (void)row_bytes, (void)g, (void)head_dim, (void)seq, (void)dst;
#endif
}

// Attends one query (KV head g). k_f32/v_f32, when not null, hold group
// g's K/V slices of seq's cells converted to f32 ([cells, head_dim]); else
// the fp16 slices are read in place (a decode reads each slice once, so
// converting them first would only add a pass over them).
void AttendOne(const F16GroupRows& rows, const AttentionShape& s,
               const SeqCells& seq, uint32_t g, const float* k_f32,
               const float* v_f32, const QueryState& query) {
#ifdef KVAULT_ATTENTION_FAST
  if (k_f32 == nullptr) {
    const uint64_t k_offset = uint64_t{g} * s.head_dim_k * 2;
    const uint64_t v_offset = uint64_t{g} * s.head_dim_v * 2;
    const SliceRows<uint16_t> k{rows.k_base + k_offset, rows.k_row_bytes,
                                seq.cells.data()};
    const SliceRows<uint16_t> v{rows.v_base + v_offset, rows.v_row_bytes,
                                seq.cells.data()};
    AttendQuery(s, seq, k, v, query);
    return;
  }
  const SliceRows<float> k{reinterpret_cast<const std::byte*>(k_f32),
                           uint64_t{s.head_dim_k} * sizeof(float), nullptr};
  const SliceRows<float> v{reinterpret_cast<const std::byte*>(v_f32),
                           uint64_t{s.head_dim_v} * sizeof(float), nullptr};
  AttendQuery(s, seq, k, v, query);
#else
  (void)rows, (void)s, (void)seq, (void)g, (void)k_f32, (void)v_f32,
      (void)query;
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
  AttendOne(rows, shape, seq, g, nullptr, nullptr, st);
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
  const uint32_t n_gqa = shape.n_head / n_kv;
  const uint64_t q_stride = uint64_t{shape.n_head} * dk;
  const uint64_t out_stride = uint64_t{shape.n_head} * dv;
  run(seq_of.size() * n_kv, [&](size_t index) {
    const size_t t = index / n_kv;
    const uint32_t g = static_cast<uint32_t>(index % n_kv);
    const uint64_t first_head = uint64_t{g} * n_gqa;
    const uint32_t s = seq_of[t];
    const float* k_f32 = nullptr;
    const float* v_f32 = nullptr;
    if (!gathered[s].empty()) {
      const size_t n = seqs[s].cells.size();
      k_f32 = &gathered[s][size_t{g} * n * dk];
      v_f32 = &gathered[s][size_t{n_kv} * n * dk + size_t{g} * n * dv];
    }
    QueryState query;
    query.q = q + t * q_stride + first_head * dk;
    query.out = out + t * out_stride + first_head * dv;
    query.pos = query_pos[t];
    AttendOne(rows, shape, seqs[s], g, k_f32, v_f32, query);
  });
}

}  // namespace kvault
