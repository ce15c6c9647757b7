#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace kvault {
namespace {

KvStorage MustCreate(const KvLayout& layout, uint64_t num_cells) {
  StatusOr<KvStorage> s = KvStorage::Create(layout, num_cells);
  KV_CHECK(s.ok()) << s.status();
  return std::move(s).value();
}

// Deterministic, distinct values per (cell, layer, side): multiples of 1/8
// below 64, exact in f16.
std::vector<float> RowValues(uint64_t cell, uint32_t layer, int side,
                             uint64_t elems) {
  std::vector<float> v(elems);
  for (uint64_t i = 0; i < elems; ++i) {
    v[i] = static_cast<float>((cell * 31 + layer * 7 + side * 3 + i) % 512) /
               8.0f -
           32.0f;
  }
  return v;
}

// What a row reads back as: exact for f32/f16, the Q8_0 round trip else.
std::vector<float> Expected(KvDtype dtype, const std::vector<float>& v) {
  std::vector<std::byte> row(DtypeRowBytes(dtype, v.size()));
  std::vector<float> back(v.size());
  EncodeRow(dtype, v, row);
  DecodeRow(dtype, row, back);
  return back;
}

void FillAll(KvStorage& s) {
  const KvLayout& l = s.layout();
  for (uint64_t c = 0; c < s.num_cells(); ++c) {
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      s.Write(KvSide::kK, layer, CellId(c),
              RowValues(c, layer, 0, l.k_row_elems()));
      s.Write(KvSide::kV, layer, CellId(c),
              RowValues(c, layer, 1, l.v_row_elems()));
    }
  }
}

class KvStorageDtypeTest : public testing::TestWithParam<KvLayout> {};

TEST_P(KvStorageDtypeTest, WriteReadEveryCellLayerAndSide) {
  KvStorage s = MustCreate(GetParam(), 13);
  const KvLayout& l = s.layout();
  FillAll(s);
  std::vector<float> k(l.k_row_elems()), v(l.v_row_elems());
  for (uint64_t c = 0; c < s.num_cells(); ++c) {
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      s.Read(KvSide::kK, layer, CellId(c), k);
      s.Read(KvSide::kV, layer, CellId(c), v);
      ASSERT_EQ(k, Expected(l.dtype, RowValues(c, layer, 0, k.size())));
      ASSERT_EQ(v, Expected(l.dtype, RowValues(c, layer, 1, v.size())));
    }
  }
}

TEST_P(KvStorageDtypeTest, RawRowsHoldTheEncoding) {
  KvStorage s = MustCreate(GetParam(), 5);
  const KvLayout& l = s.layout();
  FillAll(s);
  const KvStorage& cs = s;
  const uint32_t last = l.num_layers - 1;
  std::vector<std::byte> enc(l.v_row_bytes());
  EncodeRow(l.dtype, RowValues(3, last, 1, l.v_row_elems()), enc);
  ASSERT_EQ(cs.Rows(KvSide::kV, last, CellId(3)).size(), enc.size());
  EXPECT_TRUE(std::equal(enc.begin(), enc.end(),
                         cs.Rows(KvSide::kV, last, CellId(3)).begin()));
  // A range of rows is the concatenation of the single rows.
  std::span<const std::byte> range = cs.Rows(KvSide::kK, 0, CellId(1), 3);
  ASSERT_EQ(range.size(), 3 * l.k_row_bytes());
  for (uint64_t i = 0; i < 3; ++i) {
    std::span<const std::byte> row = cs.Rows(KvSide::kK, 0, CellId(1 + i));
    EXPECT_TRUE(std::equal(row.begin(), row.end(),
                           range.begin() + i * l.k_row_bytes()));
  }
  // Writing raw bytes is visible to ReadK.
  std::span<std::byte> dst = s.Rows(KvSide::kK, last, CellId(0));
  std::span<const std::byte> src = cs.Rows(KvSide::kK, 0, CellId(4));
  std::copy(src.begin(), src.end(), dst.begin());
  std::vector<float> a(l.k_row_elems()), b(l.k_row_elems());
  s.Read(KvSide::kK, last, CellId(0), a);
  s.Read(KvSide::kK, 0, CellId(4), b);
  EXPECT_EQ(a, b);
}

TEST_P(KvStorageDtypeTest, GatherFollowsTheGivenOrder) {
  KvStorage s = MustCreate(GetParam(), 40);
  const KvLayout& l = s.layout();
  FillAll(s);
  const uint32_t seed = 99;
  std::mt19937 rng(seed);
  // Runs of consecutive cells, reversed pieces and repeats.
  std::vector<CellId> cells;
  for (uint64_t c : {7, 8, 9, 10, 3, 2, 39, 0, 1, 1, 20, 21})
    cells.push_back(CellId(c));
  for (int i = 0; i < 20; ++i) cells.push_back(CellId(rng() % 40));
  for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
    std::vector<float> gk(cells.size() * l.k_row_elems());
    std::vector<float> gv(cells.size() * l.v_row_elems());
    s.Gather(KvSide::kK, layer, cells, gk);
    s.Gather(KvSide::kV, layer, cells, gv);
    std::vector<float> k(l.k_row_elems()), v(l.v_row_elems());
    for (size_t i = 0; i < cells.size(); ++i) {
      s.Read(KvSide::kK, layer, cells[i], k);
      s.Read(KvSide::kV, layer, cells[i], v);
      ASSERT_TRUE(std::equal(k.begin(), k.end(), gk.begin() + i * k.size()))
          << "seed " << seed << " i " << i;
      ASSERT_TRUE(std::equal(v.begin(), v.end(), gv.begin() + i * v.size()))
          << "seed " << seed << " i " << i;
    }
  }
}

TEST_P(KvStorageDtypeTest, ApplyMovesMatchesAShadowModel) {
  const uint64_t n = 32;
  KvStorage s = MustCreate(GetParam(), n);
  const KvLayout& l = s.layout();
  FillAll(s);
  // shadow[c] = the cell whose original data cell c now holds.
  std::vector<uint64_t> shadow(n);
  for (uint64_t c = 0; c < n; ++c) shadow[c] = c;
  const CellMoves moves = {{CellId(0), CellId(20), 4},   // to free-ish tail
                           {CellId(5), CellId(0), 5},    // into vacated
                           {CellId(20), CellId(10), 2},  // reads moved data
                           {CellId(31), CellId(30), 1},
                           {CellId(3), CellId(3), 0}};  // empty: no-op
  s.ApplyMoves(moves);
  for (const CellMove& m : moves) {
    for (uint64_t i = 0; i < m.count; ++i) {
      shadow[m.dst.value() + i] = shadow[m.src.value() + i];
    }
  }
  std::vector<float> k(l.k_row_elems()), v(l.v_row_elems());
  for (uint64_t c = 0; c < n; ++c) {
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      s.Read(KvSide::kK, layer, CellId(c), k);
      s.Read(KvSide::kV, layer, CellId(c), v);
      ASSERT_EQ(k, Expected(l.dtype, RowValues(shadow[c], layer, 0, k.size())))
          << "cell " << c << " layer " << layer;
      ASSERT_EQ(v, Expected(l.dtype, RowValues(shadow[c], layer, 1, v.size())))
          << "cell " << c << " layer " << layer;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, KvStorageDtypeTest,
    testing::Values(KvLayout{3, 2, 4, 6, KvDtype::kF32},
                    KvLayout{2, 3, 5, 7, KvDtype::kF16},  // odd row sizes
                    KvLayout{1, 1, 1, 1, KvDtype::kF16},
                    KvLayout{2, 3, 32, 64, KvDtype::kQ8_0},
                    KvLayout{3, 1, 96, 32, KvDtype::kQ8_0}),
    [](const testing::TestParamInfo<KvLayout>& info) {
      return std::string(DtypeName(info.param.dtype)) + "_" +
             std::to_string(info.index);
    });

TEST(KvStorageTest, CreateReportsSizesAndStartsZeroed) {
  const KvLayout layout{4, 2, 64, 64, KvDtype::kF16};
  KvStorage s = MustCreate(layout, 100);
  EXPECT_EQ(s.num_cells(), 100u);
  EXPECT_EQ(s.layout(), layout);
  EXPECT_EQ(s.memory_bytes(), 100u * 4u * 2u * 256u);
  std::vector<float> v(128, 1.0f);
  s.Read(KvSide::kV, 3, CellId(99), v);
  EXPECT_EQ(v, std::vector<float>(128, 0.0f));
}

TEST(KvStorageTest, CreateRejectsBadArguments) {
  const KvLayout bad{0, 2, 64, 64, KvDtype::kF16};
  StatusOr<KvStorage> s = KvStorage::Create(bad, 10);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "KvStorage::Create: KvLayout: num_layers 0 out of range [1, 1024]");
  const KvLayout good{2, 2, 64, 64, KvDtype::kF32};
  EXPECT_EQ(KvStorage::Create(good, 0).status().message(),
            "KvStorage::Create: num_cells must be > 0");
  // 2^40 cells x 2048 bytes overflows the 2^48-byte limit.
  StatusOr<KvStorage> huge = KvStorage::Create(good, uint64_t{1} << 40);
  EXPECT_TRUE(huge.status().IsResourceExhausted());
  EXPECT_EQ(huge.status().message(),
            "KvStorage::Create: 1099511627776 cells x 2048 bytes/cell exceeds "
            "the limit of 281474976710656 bytes");
  EXPECT_TRUE(
      KvStorage::Create(good, ~uint64_t{0}).status().IsResourceExhausted());
}

TEST(KvStorageTest, MovedFromStorageCanBeReassigned) {
  KvStorage a = MustCreate(KvLayout{1, 1, 4, 4, KvDtype::kF32}, 2);
  a.Write(KvSide::kK, 0, CellId(1), std::vector<float>{1, 2, 3, 4});
  KvStorage b = std::move(a);
  std::vector<float> k(4);
  b.Read(KvSide::kK, 0, CellId(1), k);
  EXPECT_EQ(k, (std::vector<float>{1, 2, 3, 4}));
}

TEST(KvStorageDeathTest, OutOfRangeAndMisuseDie) {
  KvStorage s = MustCreate(KvLayout{2, 1, 4, 4, KvDtype::kF32}, 8);
  std::vector<float> row(4), short_row(3);
  EXPECT_DEATH(s.Write(KvSide::kK, 2, CellId(0), row), "check failed");
  EXPECT_DEATH(s.Write(KvSide::kK, 0, CellId(8), row), "check failed");
  EXPECT_DEATH(s.Read(KvSide::kV, 0, CellId(0), short_row), "check failed");
  EXPECT_DEATH(s.Rows(KvSide::kK, 0, CellId(6), 3), "check failed");
  const std::vector<CellId> cells = {CellId(1), CellId(2)};
  EXPECT_DEATH(s.Gather(KvSide::kK, 0, cells, row), "check failed");
  const CellMoves overlap = {{CellId(0), CellId(2), 3}};
  EXPECT_DEATH(s.ApplyMoves(overlap), "overlapping move");
  const CellMoves out_of_range = {{CellId(0), CellId(6), 3}};
  EXPECT_DEATH(s.ApplyMoves(out_of_range), "check failed");
}

}  // namespace
}  // namespace kvault
