#include "kv/kv_dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/float16.h"

namespace kvault {
namespace {

uint16_t ScaleAt(const std::vector<std::byte>& row, size_t block) {
  uint16_t d;
  std::memcpy(&d, row.data() + block * kQ8_0BlockBytes, 2);
  return d;
}

int8_t QuantAt(const std::vector<std::byte>& row, size_t block, size_t i) {
  return static_cast<int8_t>(row[block * kQ8_0BlockBytes + 2 + i]);
}

TEST(KvDtypeTest, NamesParseAndIds) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    StatusOr<KvDtype> parsed = ParseDtype(DtypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
    StatusOr<KvDtype> from_id = DtypeFromId(static_cast<uint32_t>(d));
    ASSERT_TRUE(from_id.ok());
    EXPECT_EQ(*from_id, d);
  }
  EXPECT_EQ(DtypeName(KvDtype::kQ8_0), "q8_0");
  EXPECT_EQ(static_cast<int>(KvDtype::kQ8_0), 8);  // the ggml type id
  EXPECT_EQ(DtypeName(static_cast<KvDtype>(5)), "unknown");
  EXPECT_FALSE(IsSupportedDtype(static_cast<KvDtype>(2)));
}

TEST(KvDtypeTest, RejectsUnknownNamesAndIds) {
  EXPECT_EQ(ParseDtype("bf16").status().message(),
            "unknown KV dtype \"bf16\", expected f32, f16 or q8_0");
  EXPECT_EQ(ParseDtype("F16").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DtypeFromId(2).status().message(),
            "unsupported KV dtype id 2, expected 0 (f32), 1 (f16) or 8 (q8_0)");
  EXPECT_FALSE(DtypeFromId(256 + 1).ok());  // must not wrap to f16
}

TEST(KvDtypeTest, RowBytes) {
  EXPECT_EQ(DtypeRowBytes(KvDtype::kF32, 7), 28u);
  EXPECT_EQ(DtypeRowBytes(KvDtype::kF16, 7), 14u);
  EXPECT_EQ(DtypeRowBytes(KvDtype::kQ8_0, 96), 3u * 34u);
  EXPECT_EQ(DtypeBlockElems(KvDtype::kQ8_0), 32u);
  EXPECT_EQ(DtypeBlockElems(KvDtype::kF16), 1u);
}

TEST(KvDtypeTest, Q8_0BlockLayoutIsScaleThenQuants) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);  // amax 16
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.25f * static_cast<float>(i);
  std::vector<std::byte> row(2 * kQ8_0BlockBytes);
  QuantizeRowQ8_0(x, row);
  EXPECT_EQ(ScaleAt(row, 0), FloatToHalf(16.0f / 127.0f));
  EXPECT_EQ(ScaleAt(row, 1), FloatToHalf(7.75f / 127.0f));  // at byte 34
  EXPECT_EQ(QuantAt(row, 0, 0), -127);                      // x = -16
  EXPECT_EQ(QuantAt(row, 0, 16), 0);                        // x = 0
  EXPECT_EQ(QuantAt(row, 0, 20), 32);  // 4 * 127 / 16 = 31.75
  EXPECT_EQ(QuantAt(row, 0, 12), -32);
  EXPECT_EQ(QuantAt(row, 1, 31), 127);
  EXPECT_EQ(QuantAt(row, 1, 1), 4);  // 0.25 * 127 / 7.75 = 4.097
}

TEST(KvDtypeTest, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1 exactly, so x * (1 / d) == x
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  std::vector<std::byte> row(kQ8_0BlockBytes);
  QuantizeRowQ8_0(x, row);
  EXPECT_EQ(ScaleAt(row, 0), 0x3C00);  // 1.0 in fp16
  EXPECT_EQ(QuantAt(row, 0, 0), 127);
  EXPECT_EQ(QuantAt(row, 0, 1), 3);
  EXPECT_EQ(QuantAt(row, 0, 2), -3);
  EXPECT_EQ(QuantAt(row, 0, 3), 1);
}

TEST(KvDtypeTest, Q8_0ZeroBlockHasZeroScale) {
  std::vector<float> x(32, 0.0f), back(32, 1.0f);
  std::vector<std::byte> row(kQ8_0BlockBytes, std::byte{0xAB});
  QuantizeRowQ8_0(x, row);
  EXPECT_EQ(ScaleAt(row, 0), 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(QuantAt(row, 0, i), 0);
  DequantizeRowQ8_0(row, back);
  EXPECT_EQ(back, x);
}

TEST(KvDtypeTest, Q8_0ErrorIsWithinHalfAStep) {
  const uint32_t seed = 1234;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const float magnitude = std::ldexp(1.0f, trial % 40 - 20);
    std::vector<float> x(32 * 5), back(x.size());
    for (float& v : x) v = normal(rng) * magnitude;
    std::vector<std::byte> row(DtypeRowBytes(KvDtype::kQ8_0, x.size()));
    QuantizeRowQ8_0(x, row);
    DequantizeRowQ8_0(row, back);
    for (size_t b = 0; b < 5; ++b) {
      float amax = 0;
      for (size_t i = 0; i < 32; ++i)
        amax = std::max(amax, std::fabs(x[b * 32 + i]));
      const float d = amax / 127.0f;
      const float d_half = HalfToFloat(ScaleAt(row, b));
      // Rounding to the grid costs d/2; storing d in fp16 shifts the grid by
      // up to 127 * |d - d_half|.
      const float bound =
          0.5f * d + 127.0f * std::fabs(d - d_half) + 1e-6f * amax;
      for (size_t i = 0; i < 32; ++i) {
        ASSERT_LE(std::fabs(x[b * 32 + i] - back[b * 32 + i]), bound)
            << "seed " << seed << " trial " << trial << " block " << b;
      }
    }
  }
}

TEST(KvDtypeTest, EncodeDecodeRoundTripsPerDtype) {
  std::vector<float> x(96);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i) * 0.125f - 5.0f;
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    std::vector<std::byte> row(DtypeRowBytes(d, x.size()));
    std::vector<float> back(x.size());
    EncodeRow(d, x, row);
    DecodeRow(d, row, back);
    if (d == KvDtype::kQ8_0) {
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 0.05f);
    } else {
      EXPECT_EQ(back, x) << DtypeName(d);  // all values representable in f16
    }
  }
}

TEST(KvDtypeDeathTest, BadSizesDie) {
  std::vector<float> x(40);
  std::vector<std::byte> row(80);
  EXPECT_DEATH(DtypeRowBytes(KvDtype::kQ8_0, 40), "check failed");
  EXPECT_DEATH(EncodeRow(KvDtype::kF16, x, std::span(row).first(79)),
               "check failed");
  EXPECT_DEATH(DecodeRow(KvDtype::kF32, row, x), "check failed");
}

}  // namespace
}  // namespace kvault
