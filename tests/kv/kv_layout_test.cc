#include "kv/kv_layout.h"

#include <gtest/gtest.h>

namespace kvault {
namespace {

KvLayout Make(uint32_t layers, uint32_t heads, uint32_t dk, uint32_t dv,
              KvDtype dtype) {
  return KvLayout{layers, heads, dk, dv, dtype};
}

TEST(KvLayoutTest, SizesPerDtype) {
  const KvLayout f16 = Make(16, 8, 64, 64, KvDtype::kF16);
  ASSERT_TRUE(f16.Validate().ok());
  EXPECT_EQ(f16.k_row_elems(), 512u);
  EXPECT_EQ(f16.k_row_bytes(), 1024u);
  EXPECT_EQ(f16.cell_bytes(), 16u * 2048u);

  const KvLayout f32 = Make(2, 3, 5, 7, KvDtype::kF32);  // odd sizes
  ASSERT_TRUE(f32.Validate().ok());
  EXPECT_EQ(f32.k_row_bytes(), 60u);
  EXPECT_EQ(f32.v_row_elems(), 21u);
  EXPECT_EQ(f32.v_row_bytes(), 84u);
  EXPECT_EQ(f32.cell_bytes(), 2u * (60u + 84u));

  const KvLayout q8 = Make(4, 2, 128, 64, KvDtype::kQ8_0);
  ASSERT_TRUE(q8.Validate().ok());
  EXPECT_EQ(q8.k_row_bytes(), 8u * 34u);
  EXPECT_EQ(q8.v_row_bytes(), 4u * 34u);
  EXPECT_EQ(q8.cell_bytes(), 4u * 12u * 34u);
}

TEST(KvLayoutTest, ToStringAndEquality) {
  EXPECT_EQ(Make(16, 8, 64, 64, KvDtype::kF16).ToString(),
            "16 layers x 8 heads x 64/64 f16");
  EXPECT_EQ(Make(2, 1, 128, 96, KvDtype::kQ8_0).ToString(),
            "2 layers x 1 heads x 128/96 q8_0");
  EXPECT_EQ(Make(2, 1, 32, 32, KvDtype::kF32),
            Make(2, 1, 32, 32, KvDtype::kF32));
  EXPECT_NE(Make(2, 1, 32, 32, KvDtype::kF32),
            Make(2, 1, 32, 32, KvDtype::kF16));
  EXPECT_NE(Make(2, 1, 32, 32, KvDtype::kF32),
            Make(2, 1, 32, 64, KvDtype::kF32));
}

struct BadLayoutCase {
  KvLayout layout;
  const char* message;
};

TEST(KvLayoutTest, EachValidationErrorSaysWhat) {
  const BadLayoutCase cases[] = {
      {Make(0, 8, 64, 64, KvDtype::kF16),
       "KvLayout: num_layers 0 out of range [1, 1024]"},
      {Make(1025, 8, 64, 64, KvDtype::kF16),
       "KvLayout: num_layers 1025 out of range [1, 1024]"},
      {Make(4, 0, 64, 64, KvDtype::kF16),
       "KvLayout: num_kv_heads 0 out of range [1, 1024]"},
      {Make(4, 8, 0, 64, KvDtype::kF16),
       "KvLayout: head_dim_k 0 out of range [1, 16384]"},
      {Make(4, 8, 64, 16385, KvDtype::kF16),
       "KvLayout: head_dim_v 16385 out of range [1, 16384]"},
      {Make(4, 1024, 2048, 64, KvDtype::kF16),
       "KvLayout: K row of 1024 x 2048 = 2097152 elements exceeds 1048576"},
      {Make(4, 1024, 64, 1025, KvDtype::kF32),
       "KvLayout: V row of 1024 x 1025 = 1049600 elements exceeds 1048576"},
      {Make(4, 3, 20, 64, KvDtype::kQ8_0),
       "KvLayout: q8_0 needs row elements in multiples of 32, K row has "
       "3 x 20 = 60"},
      {Make(4, 2, 64, 40, KvDtype::kQ8_0),
       "KvLayout: q8_0 needs row elements in multiples of 32, V row has "
       "2 x 40 = 80"},
      {Make(4, 2, 64, 64, static_cast<KvDtype>(3)),
       "KvLayout: unsupported dtype id 3"},
  };
  for (const BadLayoutCase& c : cases) {
    const Status s = c.layout.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(KvLayoutTest, Q8_0AcceptsRowsOfWholeBlocks) {
  // 2 x 48 = 96 elements: whole blocks even though a head is not.
  EXPECT_TRUE(Make(1, 2, 48, 32, KvDtype::kQ8_0).Validate().ok());
  EXPECT_TRUE(Make(1, 3, 20, 20, KvDtype::kF16).Validate().ok());
}

TEST(KvLayoutTest, LargestLayoutDoesNotOverflow) {
  const KvLayout big = Make(1024, 1024, 1024, 1024, KvDtype::kF32);
  ASSERT_TRUE(big.Validate().ok());
  EXPECT_EQ(big.cell_bytes(), uint64_t{1024} * 2 * (uint64_t{1} << 20) * 4);
}

}  // namespace
}  // namespace kvault
