// Tests that the F16 fast attention path (attention_batched.h) gives
// bit-identical outputs to attention.cc's generic path. That path
// (AttendGroup) is file-local and Attend always prefers the fast one for
// F16, so ReferenceGroup (attention_reference.h) restates it.
// A double-precision softmax checks both within a loose tolerance too, so
// a shared mistake cannot pass unnoticed.
#include "model/attention_batched.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/float16.h"
#include "kv/kv_layout.h"
#include "kv/kv_storage.h"
#include "model/attention.h"
#include "attention_reference.h"
#include "model/ggml_compat.h"
#include "model/kernels/kernels.h"

namespace kvault {
namespace {

// Plain double softmax attention of one query head over visible cells.
void DoubleHead(const KvStorage& storage, uint32_t layer,
                const AttentionShape& s, const SeqCells& seq, Pos query_pos,
                uint32_t g, const float* q, std::vector<double>& out) {
  std::vector<float> k(storage.layout().k_row_elems());
  std::vector<float> v(storage.layout().v_row_elems());
  std::vector<double> scores;
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    if (seq.positions[i] > query_pos) continue;
    storage.Read(KvSide::kK, layer, seq.cells[i], k);
    storage.Read(KvSide::kV, layer, seq.cells[i], v);
    double dot = 0;
    for (uint32_t d = 0; d < s.head_dim_k; ++d) {
      dot += double{k[g * s.head_dim_k + d]} * q[d];
    }
    scores.push_back(dot * s.scale);
    values.emplace_back(v.begin() + g * s.head_dim_v,
                        v.begin() + (g + 1) * s.head_dim_v);
  }
  out.assign(s.head_dim_v, 0.0);
  if (scores.empty()) return;
  const double mx = *std::max_element(scores.begin(), scores.end());
  double total = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double w = std::exp(scores[i] - mx);
    total += w;
    for (uint32_t d = 0; d < s.head_dim_v; ++d) out[d] += w * values[i][d];
  }
  for (double& x : out) x /= total;
}

struct Batch {
  std::vector<SeqCells> seqs;
  std::vector<uint32_t> seq_of;
  std::vector<Pos> query_pos;
};

class AttentionBatchedTest : public testing::Test {
 protected:
  static constexpr uint32_t kLayers = 2;
  static constexpr uint32_t kLayer = 1;  // not 0, so layer offsets count
  static constexpr uint32_t kKvHeads = 2;

  // Fills a storage of `num_cells` with random rows (both layers).
  void MakeStorage(const AttentionShape& s, uint64_t num_cells) {
    KvLayout layout;
    layout.num_layers = kLayers;
    layout.num_kv_heads = s.n_head_kv;
    layout.head_dim_k = s.head_dim_k;
    layout.head_dim_v = s.head_dim_v;
    layout.dtype = KvDtype::kF16;
    auto storage = KvStorage::Create(layout, num_cells);
    ASSERT_TRUE(storage.ok()) << storage.status().ToString();
    storage_ = std::make_unique<KvStorage>(std::move(*storage));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> k(layout.k_row_elems()), v(layout.v_row_elems());
    for (uint32_t layer = 0; layer < kLayers; ++layer) {
      for (uint64_t c = 0; c < num_cells; ++c) {
        for (float& x : k) x = dist(rng_);
        for (float& x : v) x = dist(rng_);
        storage_->Write(KvSide::kK, layer, CellId(c), k);
        storage_->Write(KvSide::kV, layer, CellId(c), v);
      }
    }
  }

  // A sequence of `len` cells at positions [first_pos, first_pos + len),
  // placed at scattered cells of `free_cells` (taken from its back).
  SeqCells MakeSeq(uint32_t len, Pos first_pos,
                   std::vector<CellId>& free_cells) {
    SeqCells seq;
    for (uint32_t i = 0; i < len; ++i) {
      seq.cells.push_back(free_cells.back());
      free_cells.pop_back();
      seq.positions.push_back(first_pos + static_cast<Pos>(i));
    }
    return seq;
  }

  std::vector<float> RandomQueries(const AttentionShape& s, size_t n) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<float> q(n * s.n_head * s.head_dim_k);  // [n, n_head * dk]
    for (float& x : q) x = dist(rng_);
    return q;
  }

  // Runs Attend (fast path) and the reference on `batch`; expects equal
  // bits, and closeness to the double-precision result.
  void ExpectMatches(const AttentionShape& s, const Batch& batch,
                     const ComputeBackend& backend) {
    const size_t n = batch.seq_of.size();
    const std::vector<float> q = RandomQueries(s, n);
    const uint64_t q_stride = uint64_t{s.n_head} * s.head_dim_k;
    const uint64_t out_stride = uint64_t{s.n_head} * s.head_dim_v;
    std::vector<float> fast(n * out_stride, NAN);  // [n, n_head * dv]
    Attend(*storage_, kLayer, s, batch.seqs, batch.seq_of, batch.query_pos,
           q.data(), fast.data(), backend);
    std::vector<float> ref(n * out_stride, NAN);  // [n, n_head * dv]
    const uint32_t n_gqa = s.n_head / s.n_head_kv;
    for (size_t t = 0; t < n; ++t) {
      for (uint32_t g = 0; g < s.n_head_kv; ++g) {
        const uint64_t h0 = uint64_t{g} * n_gqa;
        ReferenceGroup(*storage_, kLayer, s, batch.seqs[batch.seq_of[t]],
                       batch.query_pos[t], g,
                       &q[t * q_stride + h0 * s.head_dim_k],
                       &ref[t * out_stride + h0 * s.head_dim_v],
                       backend.options().ggml_build);
      }
    }
    std::vector<double> want;
    for (size_t t = 0; t < n; ++t) {
      for (uint32_t h = 0; h < s.n_head; ++h) {
        DoubleHead(*storage_, kLayer, s, batch.seqs[batch.seq_of[t]],
                   batch.query_pos[t], h / n_gqa,
                   &q[t * q_stride + h * s.head_dim_k], want);
        for (uint32_t d = 0; d < s.head_dim_v; ++d) {
          const size_t i = t * out_stride + h * s.head_dim_v + d;
          ASSERT_EQ(std::bit_cast<uint32_t>(fast[i]),
                    std::bit_cast<uint32_t>(ref[i]))
              << "token " << t << " head " << h << " dim " << d << ": fast "
              << fast[i] << " reference " << ref[i];
          ASSERT_NEAR(fast[i], want[d], 2e-2)
              << "token " << t << " head " << h << " dim " << d;
        }
      }
    }
  }

  std::mt19937 rng_;
  std::unique_ptr<KvStorage> storage_;
  const ComputeBackend backend_;  // single-threaded, the CPU's best kernels
};

TEST_F(AttentionBatchedTest, FastPathBitIdenticalToReference) {
  AttentionShape probe;
  probe.n_head = 2;
  probe.n_head_kv = 2;
  probe.head_dim_k = probe.head_dim_v = 64;
  if (!CanAttendGroupF16Fast(probe, kernels::BestIsa())) {
    GTEST_SKIP() << "no F16 fast path on this CPU (isa "
                 << kernels::IsaName(kernels::BestIsa()) << ")";
  }
  // Both llama.cpp builds' q . k orders (they differ from 32 values on).
  for (ggml_compat::GgmlBuild build :
       {ggml_compat::GgmlBuild::kAvx2, ggml_compat::GgmlBuild::kAvx512}) {
    const ComputeBackend backend({.ggml_build = build});
    uint32_t seed = 1234;
    for (uint32_t dim : {32u, 40u, 64u, 96u, 128u}) {
      for (uint32_t n_gqa : {1u, 2u, 4u, 8u}) {
        for (uint32_t len : {1u, 17u, 300u}) {
          ++seed;
          SCOPED_TRACE(testing::Message()
                       << "seed " << seed << " dim " << dim << " n_gqa "
                       << n_gqa << " len " << len << " build "
                       << static_cast<int>(build));
          rng_.seed(seed);
          AttentionShape s;
          s.n_head_kv = kKvHeads;
          s.n_head = kKvHeads * n_gqa;
          s.head_dim_k = s.head_dim_v = dim;
          s.scale = 1.0f / std::sqrt(static_cast<float>(dim));
          ASSERT_TRUE(CanAttendGroupF16Fast(s, kernels::BestIsa()));
          // Two sequences scattered over a storage with free cells between.
          const uint64_t num_cells = 2 * len + 7;
          ASSERT_NO_FATAL_FAILURE(MakeStorage(s, num_cells));
          std::vector<CellId> free_cells;
          for (uint64_t c = 0; c < num_cells; ++c) {
            free_cells.push_back(CellId(c));
          }
          std::shuffle(free_cells.begin(), free_cells.end(), rng_);
          Batch prefill;
          prefill.seqs.push_back(MakeSeq(len, 5, free_cells));
          prefill.seqs.push_back(MakeSeq(len, 0, free_cells));
          // Prefill of seq 0: queries at several positions (later cells are
          // masked), one before every cell (sees nothing); seq 1 decodes.
          const Pos last = 5 + static_cast<Pos>(len) - 1;
          for (Pos p : {last, Pos{5}, 5 + static_cast<Pos>(len / 2), Pos{2},
                        last - 1}) {
            prefill.seq_of.push_back(0);
            prefill.query_pos.push_back(p);
          }
          prefill.seq_of.push_back(1);
          prefill.query_pos.push_back(static_cast<Pos>(len) - 1);
          ASSERT_NO_FATAL_FAILURE(ExpectMatches(s, prefill, backend));
          // Decode: one query, no other query of its sequence in the batch.
          Batch decode;
          decode.seqs.push_back(prefill.seqs[0]);
          decode.seq_of.push_back(0);
          decode.query_pos.push_back(last);
          ASSERT_NO_FATAL_FAILURE(ExpectMatches(s, decode, backend));
        }
      }
    }
  }
}

TEST_F(AttentionBatchedTest, DifferentKAndVHeadSizes) {
  AttentionShape s;
  s.n_head_kv = kKvHeads;
  s.n_head = kKvHeads * 4;
  s.head_dim_k = 64;
  s.head_dim_v = 32;
  s.scale = 0.125f;
  if (!CanAttendGroupF16Fast(s, kernels::BestIsa())) {
    GTEST_SKIP() << "no F16 fast path here";
  }
  const uint32_t seed = 77;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  rng_.seed(seed);
  ASSERT_NO_FATAL_FAILURE(MakeStorage(s, 64));
  std::vector<CellId> free_cells;
  for (uint64_t c = 0; c < 64; ++c) free_cells.push_back(CellId(c));
  std::shuffle(free_cells.begin(), free_cells.end(), rng_);
  Batch batch;
  batch.seqs.push_back(MakeSeq(40, 0, free_cells));
  for (Pos p = 0; p < 40; p += 3) {
    batch.seq_of.push_back(0);
    batch.query_pos.push_back(p);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(s, batch, backend_));
}

TEST_F(AttentionBatchedTest, ParallelRunMatchesReference) {
  // Enough (query head, cell) pairs that Attend splits the work over the
  // pool; the result must not change.
  AttentionShape s;
  s.n_head_kv = kKvHeads;
  s.n_head = kKvHeads * 8;
  s.head_dim_k = s.head_dim_v = 64;
  s.scale = 0.125f;
  if (!CanAttendGroupF16Fast(s, kernels::BestIsa())) {
    GTEST_SKIP() << "no F16 fast path here";
  }
  const uint32_t seed = 99;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  rng_.seed(seed);
  ASSERT_NO_FATAL_FAILURE(MakeStorage(s, 600));
  std::vector<CellId> free_cells;
  for (uint64_t c = 0; c < 600; ++c) free_cells.push_back(CellId(c));
  std::shuffle(free_cells.begin(), free_cells.end(), rng_);
  Batch batch;
  batch.seqs.push_back(MakeSeq(300, 0, free_cells));
  batch.seqs.push_back(MakeSeq(290, 10, free_cells));
  // 20 queries * ~295 cells * 16 heads > Attend's 1 << 16 threshold.
  for (Pos p = 0; p < 300; p += 15) {
    batch.seq_of.push_back(p % 30 == 0 ? 0 : 1);
    batch.query_pos.push_back(p + 9);
  }
  const ComputeBackend threads({.num_threads = 3});
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(s, batch, threads));
}

TEST_F(AttentionBatchedTest, GroupEntryPointMatchesReference) {
  AttentionShape s;
  s.n_head_kv = kKvHeads;
  s.n_head = kKvHeads * 2;
  s.head_dim_k = s.head_dim_v = 128;
  s.scale = 0.09f;
  if (!CanAttendGroupF16Fast(s, kernels::BestIsa())) {
    GTEST_SKIP() << "no F16 fast path here";
  }
  const uint32_t seed = 5;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  rng_.seed(seed);
  ASSERT_NO_FATAL_FAILURE(MakeStorage(s, 50));
  std::vector<CellId> free_cells;
  for (uint64_t c = 0; c < 50; ++c) free_cells.push_back(CellId(c));
  std::shuffle(free_cells.begin(), free_cells.end(), rng_);
  const SeqCells seq = MakeSeq(33, 0, free_cells);
  F16GroupRows rows;
  rows.k_base = storage_->Rows(KvSide::kK, kLayer, CellId(0), 50).data();
  rows.v_base = storage_->Rows(KvSide::kV, kLayer, CellId(0), 50).data();
  rows.k_row_bytes = storage_->layout().k_row_bytes();
  rows.v_row_bytes = storage_->layout().v_row_bytes();
  const std::vector<float> q = RandomQueries(s, 1);
  for (ggml_compat::GgmlBuild build :
       {ggml_compat::GgmlBuild::kAvx2, ggml_compat::GgmlBuild::kAvx512}) {
    const F16AttendMode mode = F16AttendModeFor(kernels::BestIsa(), build);
    for (uint32_t g = 0; g < kKvHeads; ++g) {
      for (Pos p : {Pos{0}, Pos{20}, Pos{32}}) {
        std::vector<float> fast(2 * 128, NAN), ref(2 * 128, NAN);
        const float* qg = &q[g * 2 * 128];
        AttendGroupF16Fast(rows, s, seq, p, g, mode, qg, fast.data());
        ReferenceGroup(*storage_, kLayer, s, seq, p, g, qg, ref.data(), build);
        EXPECT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * 4))
            << "g " << g << " pos " << p << " build "
            << static_cast<int>(build);
      }
    }
  }
}

}  // namespace
}  // namespace kvault
