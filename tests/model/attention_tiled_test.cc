// The tiled prefill path (attention_tiled.h) against attention.cc's
// per-cell reference (attention_reference.h): bit-identical outputs for
// prefill batches across head sizes, GQA ratios, cached depths, chunk
// lengths (one cell block and several; one query tile and several) and
// contiguous or scattered cell layouts. Also exact_exp.h against std::exp.
#include "model/attention_tiled.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kv/kv_storage.h"
#include "model/attention.h"
#include "model/attention_batched.h"
#include "attention_reference.h"
#include "model/exact_exp.h"

namespace kvault {
namespace {

constexpr uint32_t kLayer = 1;

struct Case {
  uint32_t dim;
  uint32_t n_gqa;
  uint32_t depth;    // cells cached before the prefill's tokens
  uint32_t chunk;    // prefill tokens in the batch
  bool scattered;    // cells in shuffled order over the storage
};

AttentionShape ShapeOf(const Case& c) {
  AttentionShape s;
  s.n_head_kv = 2;
  s.n_head = 2 * c.n_gqa;
  s.head_dim_k = s.head_dim_v = c.dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  return s;
}

std::unique_ptr<KvStorage> RandomStorage(const AttentionShape& s,
                                         uint64_t cells, std::mt19937& rng) {
  KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = s.n_head_kv;
  layout.head_dim_k = s.head_dim_k;
  layout.head_dim_v = s.head_dim_v;
  layout.dtype = KvDtype::kF16;
  auto storage = KvStorage::Create(layout, cells);
  EXPECT_TRUE(storage.ok());
  auto out = std::make_unique<KvStorage>(std::move(*storage));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(layout.k_row_elems()), v(layout.v_row_elems());
  for (uint64_t c = 0; c < cells; ++c) {
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    out->Write(KvSide::kK, kLayer, CellId(c), k);
    out->Write(KvSide::kV, kLayer, CellId(c), v);
  }
  return out;
}

// Runs Attend on one sequence of depth + chunk cells with the chunk's
// queries (the batch `query_pos`, in batch order) and compares every
// output bit with the reference.
void ExpectTiledMatches(const Case& c, const std::vector<Pos>& query_pos,
                        const ComputeBackend& backend, uint32_t seed) {
  SCOPED_TRACE(testing::Message()
               << "dim " << c.dim << " n_gqa " << c.n_gqa << " depth "
               << c.depth << " chunk " << c.chunk << " scattered "
               << c.scattered << " seed " << seed);
  std::mt19937 rng(seed);
  const AttentionShape s = ShapeOf(c);
  const uint32_t len = c.depth + c.chunk;
  const uint64_t num_cells = 2 * uint64_t{len} + 5;
  auto storage = RandomStorage(s, num_cells, rng);
  std::vector<CellId> cells;
  for (uint64_t c = 0; c < num_cells; ++c) cells.push_back(CellId(c));
  if (c.scattered) std::shuffle(cells.begin(), cells.end(), rng);
  std::vector<SeqCells> seqs(1);
  for (uint32_t i = 0; i < len; ++i) {
    seqs[0].cells.push_back(cells[i]);
    seqs[0].positions.push_back(static_cast<Pos>(3 + i));
  }
  const std::vector<uint32_t> seq_of(query_pos.size(), 0);
  std::uniform_real_distribution<float> qd(-2.0f, 2.0f);
  std::vector<float> q(query_pos.size() * s.n_head * s.head_dim_k);
  for (float& x : q) x = qd(rng);
  const size_t out_stride = size_t{s.n_head} * s.head_dim_v;
  std::vector<float> got(query_pos.size() * out_stride, NAN);
  std::vector<float> want(got.size(), NAN);
  Attend(*storage, kLayer, s, seqs, seq_of, query_pos, q.data(), got.data(),
         backend);
  for (size_t t = 0; t < query_pos.size(); ++t) {
    for (uint32_t g = 0; g < s.n_head_kv; ++g) {
      const size_t h0 = size_t{g} * c.n_gqa;
      ReferenceGroup(*storage, kLayer, s, seqs[0], query_pos[t], g,
                     &q[(t * s.n_head + h0) * s.head_dim_k],
                     &want[t * out_stride + h0 * s.head_dim_v],
                     backend.options().ggml_build);
    }
  }
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "token " << i / out_stride << " value " << i % out_stride
        << ": tiled " << got[i] << " reference " << want[i];
  }
}

// The chunk's own positions, in order: a prefill after `depth` cells.
std::vector<Pos> ChunkPositions(const Case& c) {
  std::vector<Pos> pos;
  for (uint32_t i = 0; i < c.chunk; ++i) {
    pos.push_back(static_cast<Pos>(3 + c.depth + i));
  }
  return pos;
}

class AttentionTiledTest : public testing::Test {
 protected:
  void SetUp() override {
    AttentionShape probe;
    probe.n_head = probe.n_head_kv = 2;
    probe.head_dim_k = probe.head_dim_v = 64;
    if (!CanAttendGroupF16Fast(probe, kernels::BestIsa())) {
      GTEST_SKIP() << "no F16 fast path";
    }
  }

  const ComputeBackend backend_;
};

TEST_F(AttentionTiledTest, PrefillBitIdenticalToReference) {
  // Both llama.cpp builds' q . k orders (they differ from 32 values on).
  for (ggml_compat::GgmlBuild build :
       {ggml_compat::GgmlBuild::kAvx2, ggml_compat::GgmlBuild::kAvx512}) {
    SCOPED_TRACE(testing::Message() << "build " << static_cast<int>(build));
    const ComputeBackend backend({.ggml_build = build});
    uint32_t seed = 500;
    for (uint32_t dim : {8u, 16u, 32u, 64u, 96u, 128u}) {
      for (uint32_t n_gqa : {1u, 2u, 4u, 8u}) {
        for (uint32_t depth : {0u, 70u, 200u}) {
          for (uint32_t chunk : {2u, 19u, 70u}) {
            const Case c{dim, n_gqa, depth, chunk, (seed & 1) == 0};
            ASSERT_NO_FATAL_FAILURE(
                ExpectTiledMatches(c, ChunkPositions(c), backend, ++seed));
          }
        }
      }
    }
  }
}

TEST_F(AttentionTiledTest, ScatteredAndContiguousCellsAlike) {
  for (bool scattered : {false, true}) {
    const Case c{64, 2, 150, 40, scattered};
    ASSERT_NO_FATAL_FAILURE(
        ExpectTiledMatches(c, ChunkPositions(c), backend_, 77));
  }
}

TEST_F(AttentionTiledTest, QueriesInAnyOrderAndBeforeEveryCell) {
  // Positions out of order, repeated ones, and one before the first cell
  // (it sees nothing: zeros).
  const Case c{64, 4, 90, 6, true};
  ASSERT_NO_FATAL_FAILURE(ExpectTiledMatches(
      c, {Pos{95}, Pos{3}, Pos{1}, Pos{40}, Pos{95}, Pos{64}}, backend_, 9));
}

TEST_F(AttentionTiledTest, ThreadsChangeNothing) {
  const ComputeBackend threads({.num_threads = 4});
  const Case c{64, 2, 400, 100, true};
  ASSERT_NO_FATAL_FAILURE(
      ExpectTiledMatches(c, ChunkPositions(c), threads, 31));
}

TEST(PositionsIncreaseTest, DetectsOrder) {
  SeqCells seq;
  seq.cells = {CellId(4), CellId(1), CellId(9)};
  seq.positions = {0, 2, 7};
  EXPECT_TRUE(PositionsIncrease(seq));
  seq.positions = {0, 7, 2};
  EXPECT_FALSE(PositionsIncrease(seq));
  seq.positions = {0, 2, 2};
  EXPECT_FALSE(PositionsIncrease(seq));
}

TEST(ExactExpTest, SameBitsAsStdExp) {
  // A stride through every float in [-105, 0] (an exhaustive run of all
  // 1.1e9 of them matched when this was written), plus special values.
  std::vector<float> x;
  for (uint64_t u = 0x80000000u; u <= 0xC2D20000u; u += 997) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  }
  for (float v : {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 1.5f, 90.0f,
                  -104.0f, -87.5f, -1e-30f}) {
    x.push_back(v);
  }
  std::vector<float> y = x;
  ExpInPlace(y.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(y[i]))
        << "exp(" << x[i] << ")";
  }
}

}  // namespace
}  // namespace kvault
