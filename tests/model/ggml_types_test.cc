#include "model/ggml_types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace kvault {
namespace {

using ::testing::HasSubstr;

TEST(GgmlTypesTest, KnownLayouts) {
  struct Want {
    uint32_t id;
    const char* name;
    uint32_t block_size;
    uint32_t bytes_per_block;
  };
  // Facts of ggml's formats (ggml.h ids, ggml-common.h block structs).
  const Want wants[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},
      {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
      {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},
      {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},
      {16, "iq2_xxs", 256, 66}, {20, "iq4_nl", 32, 18},
      {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},
      {27, "i64", 1, 8},        {28, "f64", 1, 8},
      {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},
      {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},
  };
  for (const Want& w : wants) {
    const GgmlTypeInfo* info = FindGgmlType(w.id);
    ASSERT_NE(info, nullptr) << w.name;
    EXPECT_EQ(info->name, w.name);
    EXPECT_EQ(info->block_size, w.block_size) << w.name;
    EXPECT_EQ(info->bytes_per_block, w.bytes_per_block) << w.name;
  }
}

TEST(GgmlTypesTest, RemovedAndOutOfRangeIdsAreUnknown) {
  for (uint32_t id :
       {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_EQ(FindGgmlType(id), nullptr) << id;
  }
}

TEST(GgmlTypesTest, TableIsConsistent) {
  std::set<std::string_view> names;
  uint32_t prev = 0;
  bool first = true;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    const uint32_t id = static_cast<uint32_t>(info.type);
    if (!first) {
      EXPECT_GT(id, prev);  // ordered by id
    }
    first = false;
    prev = id;
    EXPECT_EQ(FindGgmlType(id), &info);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_GT(info.block_size, 0u);
    EXPECT_GT(info.bytes_per_block, 0u);
    auto parsed = ParseGgmlType(info.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, info.type);
  }
  EXPECT_EQ(*ParseGgmlType("Q8_0"), GgmlType::kQ8_0);
  EXPECT_EQ(ParseGgmlType("q4_2").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GgmlTypesTest, RowBytes) {
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF32, 10), 40u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_THAT(GgmlRowBytes(GgmlType::kQ8_0, 48).status().ToString(),
              HasSubstr("not a multiple of its block size 32"));
  EXPECT_THAT(GgmlRowBytes(GgmlType::kF64, ~uint64_t{0}).status().ToString(),
              HasSubstr("overflows"));
}

TEST(GgmlTypesTest, SupportedTypes) {
  for (GgmlType t :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    EXPECT_TRUE(CheckGgmlTypeSupported(t).ok()) << GgmlTypeName(t);
  }
  Status s = CheckGgmlTypeSupported(GgmlType::kIQ2_XS);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("iq2_xs"));
}

}  // namespace
}  // namespace kvault
