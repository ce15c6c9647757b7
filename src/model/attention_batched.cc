#include "model/attention_batched.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "model/attention_simd.h"
#include "model/attention_tiled.h"

namespace kvault {
namespace {

constexpr uint32_t kMaxHeadDim = 256;
constexpr uint32_t kMaxGqa = 64;
constexpr uint32_t kMinHeadDimK = 8;

}  // namespace

bool CanAttendGroupF16Fast(const AttentionShape& shape, kernels::Isa isa) {
#ifdef KVAULT_ATTENTION_FAST
  const uint32_t n_gqa = shape.n_head / shape.n_head_kv;
  return isa != kernels::Isa::kScalar && Float16UsesF16c() &&
         // Heads under 32 values (the golden-test models') do their whole
         // dot product in DotOne's double tail, as ggml_compat::DotF16.
         shape.head_dim_k >= kMinHeadDimK && shape.head_dim_k % 8 == 0 &&
         shape.head_dim_v % 8 == 0 && shape.head_dim_k <= kMaxHeadDim &&
         shape.head_dim_v <= kMaxHeadDim && n_gqa <= kMaxGqa;
#else
  (void)shape, (void)isa;
  return false;
#endif
}

namespace {

// One query: its heads, where its output goes, and its position.
struct QueryState {
  const float* q = nullptr;  // [n_gqa, dk]
  float* out = nullptr;      // [n_gqa, dv]
  Pos pos = 0;
  bool two_at_once = false;  // AccumulateHeads takes two heads at a time
  bool dot512 = false;       // F16AttendMode::dot512
};

#ifdef KVAULT_ATTENTION_FAST
using namespace attention_simd;  // NOLINT: this file's vocabulary

// Where one KV head's K (or V) slices are: the slice of the sequence's
// i-th cell at base + cells[i] * stride, read in place from the pool.
struct SliceRows {
  const std::byte* base = nullptr;
  uint64_t stride = 0;
  const CellId* cells = nullptr;

  const uint16_t* Row(size_t i) const {
    return reinterpret_cast<const uint16_t*>(base + cells[i].value() * stride);
  }
};

// Per-thread buffers of AttendQuery, reused across queries.
struct QueryScratch {
  std::vector<float> qs;                // [n_gqa, dk] fp16-rounded
  std::vector<const uint16_t*> krows;   // attended cells, in order
  std::vector<const uint16_t*> vrows;
  std::vector<float> scores;            // [cells, n_gqa]
  std::vector<CellTerms> terms;         // [n_gqa, cells]
  std::vector<float> exps;              // [cells]
  std::vector<SoftmaxState> states;     // [n_gqa]
};

// Every visible cell's scores for all heads (independent, so they overlap
// in the core), K fetched kPrefetchCells ahead, in the order of an
// AVX-512 (kDot512) or AVX2 llama.cpp build. Returns the cell count.
template <bool kDot512>
KV_AVX2 uint32_t ScoreCells(const AttentionShape& s, const SeqCells& seq,
                            const SliceRows& k, const SliceRows& v, Pos pos,
                            QueryScratch& x) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  uint32_t n = 0;
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    if (seq.positions[i] > pos) continue;  // causal mask
    x.krows[n] = k.Row(i);
    x.vrows[n++] = v.Row(i);
  }
  uint32_t m = 0;
  if (dk % kDotStep<kDot512> == 0) {
    for (; m + 8 <= n; m += 8) {
      const uint32_t end = std::min(n, m + kPrefetchCells + 8);
      for (uint32_t a = m + kPrefetchCells; a < end; ++a) {
        PrefetchRow(x.krows[a], sizeof(uint16_t) * dk);
      }
      for (uint32_t j = 0; j < n_gqa; ++j) {
        Dot8Keys<kDot512>(&x.krows[m], &x.qs[size_t{j} * dk], dk,
                          &x.scores[size_t{m} * n_gqa + j], n_gqa);
      }
    }
  }
  for (; m < n; ++m) {
    for (uint32_t j = 0; j < n_gqa; ++j) {
      x.scores[size_t{m} * n_gqa + j] =
          DotOne<kDot512>(x.krows[m], &x.qs[size_t{j} * dk], dk);
    }
  }
  return n;
}

// Attends one query over the cells of seq with positions <= st.pos, whose
// K/V slices of one group are k ([dk] each) and v ([dv] each), read in
// place (a decode reads each slice once). Three passes: every cell's
// scores, each head's softmax terms, then each head's V accumulation.
KV_AVX2 void AttendQuery(const AttentionShape& s, const SeqCells& seq,
                         const SliceRows& k, const SliceRows& v,
                         const QueryState& st) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dv = s.head_dim_v;
  thread_local QueryScratch x;
  x.qs.assign(st.q, st.q + size_t{n_gqa} * s.head_dim_k);
  RoundHalfRow(x.qs.data(), n_gqa * s.head_dim_k);
  const size_t num_cells = seq.cells.size();
  x.krows.resize(num_cells);
  x.vrows.resize(num_cells);
  x.scores.resize(num_cells * n_gqa);
  x.terms.resize(num_cells * n_gqa);
  x.exps.resize(num_cells);
  const uint32_t n = st.dot512 ? ScoreCells<true>(s, seq, k, v, st.pos, x)
                               : ScoreCells<false>(s, seq, k, v, st.pos, x);
  // The V loop fetches kPrefetchVCells ahead of itself; its first cells
  // arrive while the softmax runs.
  for (uint32_t i = 0; i < std::min(n, kPrefetchVCells); ++i) {
    PrefetchRow(x.vrows[i], sizeof(uint16_t) * dv);
  }
  x.states.assign(n_gqa, SoftmaxState{});
  for (uint32_t j = 0; j < n_gqa; ++j) {
    SoftmaxTermsRow(&x.scores[j], n_gqa, n, s.scale, &x.states[j],
                    x.exps.data(), &x.terms[size_t{j} * n]);
  }
  std::fill(st.out, st.out + size_t{n_gqa} * dv, 0.0f);
  AccumulateHeads(x.vrows.data(), n, n_gqa, dv, st.two_at_once, x.terms.data(),
                  n, st.out, dv);
  for (uint32_t j = 0; j < n_gqa; ++j) {
    Normalize(x.states[j].sum, dv, st.out + size_t{j} * dv);
  }
}
#endif

// Attends one query (KV head g), reading the fp16 slices in place.
void AttendOne(const F16GroupRows& rows, const AttentionShape& s,
               const SeqCells& seq, uint32_t g, const QueryState& query) {
#ifdef KVAULT_ATTENTION_FAST
  const uint64_t k_offset = uint64_t{g} * s.head_dim_k * 2;
  const uint64_t v_offset = uint64_t{g} * s.head_dim_v * 2;
  const SliceRows k{rows.k_base + k_offset, rows.k_row_bytes,
                    seq.cells.data()};
  const SliceRows v{rows.v_base + v_offset, rows.v_row_bytes,
                    seq.cells.data()};
  AttendQuery(s, seq, k, v, query);
#else
  (void)rows, (void)s, (void)seq, (void)g, (void)query;
#endif
}

// A unit of AttendF16Fast's work for one KV head: a tile of a prefill
// sequence's tokens, or one token.
struct WorkItem {
  uint32_t seq = 0;
  uint32_t first = 0;  // into tiled[seq] (a tile) or the batch token
  uint32_t count = 0;  // tokens of a tile; 0: one token attends alone
};

}  // namespace

F16AttendMode F16AttendModeFor(kernels::Isa isa, ggml_compat::GgmlBuild build) {
  F16AttendMode mode;
  mode.two_at_once = isa == kernels::Isa::kAvx512;
  mode.dot512 = build == ggml_compat::GgmlBuild::kAvx512;
  return mode;
}

void AttendGroupF16Fast(const F16GroupRows& rows, const AttentionShape& shape,
                        const SeqCells& seq, Pos query_pos, uint32_t g,
                        const F16AttendMode& mode, const float* q, float* out) {
  QueryState st;
  st.q = q;
  st.out = out;
  st.pos = query_pos;
  st.two_at_once = mode.two_at_once;
  st.dot512 = mode.dot512;
  AttendOne(rows, shape, seq, g, st);
}

void AttendF16Fast(
    const F16GroupRows& rows, const AttentionShape& shape,
    const F16AttendMode& mode, std::span<const SeqCells> seqs,
    std::span<const uint32_t> seq_of, std::span<const Pos> query_pos,
    const float* q, float* out,
    const std::function<void(size_t, const std::function<void(size_t)>&)>&
        run) {
  // Sequences with several queries in the batch (a prefill) attend in
  // tiles of their tokens; the others one token at a time.
  std::vector<std::vector<uint32_t>> tiled(seqs.size());
  for (uint32_t t = 0; t < seq_of.size(); ++t) tiled[seq_of[t]].push_back(t);
  std::vector<WorkItem> items;
  const uint32_t per_tile = TiledTokensPerTask(shape);
  for (uint32_t s = 0; s < seqs.size(); ++s) {
    const std::vector<uint32_t>& tokens = tiled[s];
    if (tokens.size() >= 2 && PositionsIncrease(seqs[s])) {
      for (uint32_t i = 0; i < tokens.size(); i += per_tile) {
        const uint32_t n = std::min<uint32_t>(per_tile, tokens.size() - i);
        items.push_back({s, i, n});
      }
    } else {
      for (uint32_t t : tokens) items.push_back({s, t, 0});
    }
  }
  const uint32_t n_kv = shape.n_head_kv;
  const uint32_t n_gqa = shape.n_head / n_kv;
  const uint64_t q_stride = uint64_t{shape.n_head} * shape.head_dim_k;
  const uint64_t out_stride = uint64_t{shape.n_head} * shape.head_dim_v;
  run(items.size() * n_kv, [&](size_t index) {
    const WorkItem& item = items[index / n_kv];
    const uint32_t g = static_cast<uint32_t>(index % n_kv);
    if (item.count > 0) {
      const std::span<const uint32_t> tokens(&tiled[item.seq][item.first],
                                             item.count);
      AttendTile(rows, shape, seqs[item.seq], tokens, query_pos, g, mode, q,
                 out);
      return;
    }
    const uint32_t t = item.first;
    const uint64_t first_head = uint64_t{g} * n_gqa;
    QueryState query;
    query.q = q + t * q_stride + first_head * shape.head_dim_k;
    query.out = out + t * out_stride + first_head * shape.head_dim_v;
    query.pos = query_pos[t];
    query.two_at_once = mode.two_at_once;
    query.dot512 = mode.dot512;
    AttendOne(rows, shape, seqs[item.seq], g, query);
  });
}

}  // namespace kvault
