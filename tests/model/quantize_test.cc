#include "model/quantize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/float16.h"
#include "model/gguf_file.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

float BlockScale(const std::vector<std::byte>& q, size_t block_bytes,
                 size_t b) {
  uint16_t h;
  std::memcpy(&h, q.data() + b * block_bytes, 2);
  return HalfToFloat(h);
}

std::vector<float> RandomValues(uint64_t seed, size_t n, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(QuantizeTest, Q8_0KnownBlock) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) / 16.0f;
  std::vector<std::byte> q(34);
  QuantizeRowQ8_0(x, q);
  // amax = 1 (x[0] = -1), d = 1/127; q = round(x * 127).
  EXPECT_EQ(BlockScale(q, 34, 0), HalfToFloat(FloatToHalf(1.0f / 127.0f)));
  for (int i = 0; i < 32; ++i) {
    const int want = static_cast<int>(std::round(x[i] * 127.0f));
    EXPECT_EQ(static_cast<int8_t>(q[2 + i]), want) << i;
  }
  std::vector<float> back(32);
  DequantizeRowQ8_0(q, back);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 0.5f / 127 + 1e-3f);
}

TEST(QuantizeTest, Q4_0KnownBlockAndNibbleLayout) {
  // Integers -8..7 times 0.1: the largest magnitude is -0.8, so d = 0.1 and
  // every value is exactly representable.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i % 16) - 8) * 0.1f;
  x[16] = 0.7f;  // value 16 goes to the high nibble of byte 0
  std::vector<std::byte> q(18);
  QuantizeRowQ4_0(x, q);
  const float d = BlockScale(q, 18, 0);
  EXPECT_NEAR(d, 0.1f, 1e-4f);
  const auto byte0 = static_cast<uint8_t>(q[2]);
  EXPECT_EQ(byte0 & 0x0F, 0);  // x[0] = -0.8 -> nibble 0
  EXPECT_EQ(byte0 >> 4, 15);   // x[16] = 0.7 -> nibble 15
  EXPECT_EQ(static_cast<uint8_t>(q[2 + 9]) & 0x0F, 9);  // x[9] = 0.1
  std::vector<float> back(32);
  DequantizeRowQ4_0(q, back);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 1e-3f) << i;
}

TEST(QuantizeTest, ZeroBlocks) {
  std::vector<float> x(64, 0.0f), back(64, 1.0f);
  std::vector<std::byte> q8(68), q4(36);
  QuantizeRowQ8_0(x, q8);
  DequantizeRowQ8_0(q8, back);
  for (float v : back) EXPECT_EQ(v, 0.0f);
  QuantizeRowQ4_0(x, q4);
  DequantizeRowQ4_0(q4, back);
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST(QuantizeTest, RandomRoundTripErrorBounds) {
  const uint64_t seed = 77;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<float> x = RandomValues(seed, 32 * 200, 0.02f);
  std::vector<std::byte> q8(200 * 34), q4(200 * 18);
  std::vector<float> b8(x.size()), b4(x.size());
  QuantizeRowQ8_0(x, q8);
  DequantizeRowQ8_0(q8, b8);
  QuantizeRowQ4_0(x, q4);
  DequantizeRowQ4_0(q4, b4);
  for (size_t b = 0; b < 200; ++b) {
    const float d8 = BlockScale(q8, 34, b);
    const float d4 = std::fabs(BlockScale(q4, 18, b));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      // Half a step, plus the f16 rounding of d times up to 127 / 8 steps.
      EXPECT_LE(std::fabs(b8[i] - x[i]), 0.5f * d8 + 127 * d8 * 1e-3f) << i;
      EXPECT_LE(std::fabs(b4[i] - x[i]), 1.0f * d4 + 8 * d4 * 1e-3f) << i;
    }
  }
}

TEST(QuantizeTest, DispatchAndErrors) {
  const std::vector<float> x = {1.0f, -2.5f, 1e-8f, 65504.0f};
  std::vector<std::byte> f16(8), bf16(8), f32(16);
  ASSERT_TRUE(QuantizeRow(GgmlType::kF32, x, f32).ok());
  EXPECT_EQ(std::memcmp(f32.data(), x.data(), 16), 0);
  ASSERT_TRUE(QuantizeRow(GgmlType::kF16, x, f16).ok());
  uint16_t h;
  std::memcpy(&h, f16.data() + 2, 2);
  EXPECT_EQ(h, FloatToHalf(-2.5f));
  ASSERT_TRUE(QuantizeRow(GgmlType::kBF16, x, bf16).ok());
  std::vector<float> back(4);
  ASSERT_TRUE(DequantizeRow(GgmlType::kBF16, bf16, back).ok());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_NEAR(back[3], 65504.0f, 256.0f);
  EXPECT_THAT(QuantizeRow(GgmlType::kF16, x, f32).ToString(),
              HasSubstr("take 8 bytes, got 16"));
  std::vector<float> row(256);
  std::vector<std::byte> q(*GgmlRowBytes(GgmlType::kIQ2_XS, 256));
  EXPECT_EQ(QuantizeRow(GgmlType::kIQ2_XS, row, q).code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ8_0, q, row).code(),
            StatusCode::kInvalidArgument);
}

// llama.cpp converted the same weights to f16 and q8_0; our conversions of
// the f32 file must reproduce those bytes exactly.
TEST(QuantizeTest, MatchesLlamaCppConversions) {
  const std::string dir = std::string(KVAULT_SOURCE_DIR) + "/../shared/models";
  for (const char* name :
       {"stories260K.gguf", "stories260K.f16.gguf", "stories260K.q8_0.gguf"}) {
    if (!std::filesystem::exists(dir + "/" + name)) {
      GTEST_SKIP() << "shared test file " << dir << "/" << name
                   << " is missing";
    }
  }
  auto f32 = GgufFile::Open(dir + "/stories260K.gguf");
  auto f16 = GgufFile::Open(dir + "/stories260K.f16.gguf");
  auto q8 = GgufFile::Open(dir + "/stories260K.q8_0.gguf");
  ASSERT_TRUE(f32.ok() && f16.ok() && q8.ok());
  int num_q8 = 0;
  for (const GgufTensorInfo& t : (*f32)->tensors()) {
    const auto src_bytes = (*f32)->TensorData(t);
    std::vector<float> src(t.num_elements);
    std::memcpy(src.data(), src_bytes.data(), src_bytes.size());
    for (const auto* other : {f16->get(), q8->get()}) {
      const GgufTensorInfo* o = other->FindTensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      std::vector<std::byte> ours(o->size_bytes);
      ASSERT_TRUE(QuantizeRow(o->type, src, ours).ok()) << t.name;
      const auto theirs = other->TensorData(*o);
      EXPECT_EQ(std::memcmp(ours.data(), theirs.data(), ours.size()), 0)
          << t.name << " as " << GgmlTypeName(o->type);
      if (o->type == GgmlType::kQ8_0) ++num_q8;
    }
  }
  EXPECT_EQ(num_q8, 32);
}

}  // namespace
}  // namespace kvault
