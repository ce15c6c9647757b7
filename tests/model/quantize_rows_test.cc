// Edge blocks for every row quantizer: all zeros, one nonzero value,
// constants, huge and tiny values, an outlier and values below ggml's group
// epsilon. The expected bytes are those llama.cpp b10573's
// `llama-quantize --pure` wrote for the same rows (put into a gen-model
// file's blk.0.attn_q.weight), recorded as FNV-1a 64 hashes.
#include "model/quantize_rows.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/float16.h"
#include "model/quantize.h"

namespace kvault {
namespace {

constexpr int kRowLen = 256;

// Nine rows of 256 values; double arithmetic then rounding to float, as
// the Python script that made the reference file computed them.
std::vector<float> EdgeRows() {
  std::vector<double> v;
  auto row = [&](auto f) {
    for (int i = 0; i < kRowLen; ++i) v.push_back(f(i));
  };
  row([](int) { return 0.0; });
  row([](int i) { return i == 37 ? 0.75 : 0.0; });
  row([](int) { return 0.5; });
  row([](int) { return -2.0; });
  row([](int i) { return (i % 2 ? 1 : -1) * 1.0e4 * ((i % 7) + 1) / 7.0; });
  row([](int i) { return 1.0e-6 * ((i % 13) - 6); });
  row([](int i) { return (i - 128) / 64.0; });
  row([](int i) { return i == 200 ? 100.0 : 1.0e-3 * ((i * 37) % 17 - 8); });
  row([](int i) { return i == 0 ? -1.0e-20 : i == 255 ? 3.0e-8 : 0.0; });
  return std::vector<float>(v.begin(), v.end());
}

uint64_t Fnv1a64(const std::vector<std::byte>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= static_cast<uint8_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

struct Golden {
  GgmlType type;
  uint64_t hash;
};

TEST(QuantizeRowsTest, EdgeBlocksMatchLlamaQuantize) {
  const std::vector<float> rows = EdgeRows();
  const Golden golden[] = {
      {GgmlType::kQ4_0, 0xd1899f2c6dada5dfull},
      {GgmlType::kQ4_1, 0x29d9129ae09f9da8ull},
      {GgmlType::kQ5_0, 0x623516979b43c4d8ull},
      {GgmlType::kQ5_1, 0xc4908a7582f7343cull},
      {GgmlType::kQ8_0, 0x21530aca599735a5ull},
      {GgmlType::kQ2_K, 0x27156a560a033da8ull},
      {GgmlType::kQ3_K, 0x8d9919ab95b1dcbeull},
      {GgmlType::kQ4_K, 0xdcdb7439629cbb35ull},
      {GgmlType::kQ5_K, 0x7fa163f60942d4a5ull},
      {GgmlType::kQ6_K, 0x874f0a7437c3b1f7ull},
      {GgmlType::kIQ4_NL, 0x5b2f27b563a28ffaull},
      {GgmlType::kIQ4_XS, 0x8a97938b99996c84ull},
  };
  for (const Golden& g : golden) {
    std::vector<std::byte> q(*GgmlRowBytes(g.type, rows.size()));
    ASSERT_TRUE(QuantizeRow(g.type, rows, q).ok()) << GgmlTypeName(g.type);
    EXPECT_EQ(Fnv1a64(q), g.hash) << GgmlTypeName(g.type);
  }
}

uint16_t HalfAt(const std::vector<std::byte>& q, size_t offset) {
  uint16_t h;
  std::memcpy(&h, q.data() + offset, 2);
  return h;
}

TEST(QuantizeRowsTest, ZeroRowsHaveZeroScales) {
  const std::vector<float> zeros(kRowLen, 0.0f);
  struct ScaleAt {
    GgmlType type;
    size_t offset;  // of the f16 super-block scale
  };
  for (const ScaleAt& s : {ScaleAt{GgmlType::kQ4_1, 0},
                           {GgmlType::kQ5_0, 0},
                           {GgmlType::kQ5_1, 0},
                           {GgmlType::kQ2_K, 80},
                           {GgmlType::kQ3_K, 108},
                           {GgmlType::kQ4_K, 0},
                           {GgmlType::kQ5_K, 0},
                           {GgmlType::kQ6_K, 208},
                           {GgmlType::kIQ4_NL, 0},
                           {GgmlType::kIQ4_XS, 0}}) {
    std::vector<std::byte> q(*GgmlRowBytes(s.type, kRowLen));
    ASSERT_TRUE(QuantizeRow(s.type, zeros, q).ok());
    EXPECT_EQ(HalfAt(q, s.offset) & 0x7FFF, 0) << GgmlTypeName(s.type);
  }
  // IQ4_NL codes a zero as level 8 (value 1), in both nibbles.
  std::vector<std::byte> q(18);
  QuantizeRowIQ4_NL(std::span<const float>(zeros).first(32), q);
  EXPECT_EQ(q[2], std::byte{0x88});
}

TEST(QuantizeRowsTest, ConstantRowQ6_KKeepsTheValue) {
  // A constant block: every group's scale is the same, so each value is
  // (level - 32) * d * scale with level 0..63 and the value exact in f16.
  const std::vector<float> x(kRowLen, -2.0f);
  std::vector<std::byte> q(210);
  QuantizeRowQ6_K(x, q);
  const float d = HalfToFloat(HalfAt(q, 208));
  const auto scale = static_cast<int8_t>(q[192]);
  const int level = (static_cast<uint8_t>(q[0]) & 0xF) |
                    ((static_cast<uint8_t>(q[128]) & 3) << 4);
  EXPECT_FLOAT_EQ(d * static_cast<float>(scale) * (level - 32), -2.0f);
}

TEST(QuantizeRowsTest, WrongSizeIsAnError) {
  const std::vector<float> x(kRowLen, 1.0f);
  std::vector<std::byte> q(100);
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kIQ4_XS, GgmlType::kQ5_1}) {
    EXPECT_EQ(QuantizeRow(t, x, q).code(), StatusCode::kInvalidArgument);
  }
  const std::vector<float> odd(100, 1.0f);
  std::vector<std::byte> q2(1000);
  EXPECT_EQ(QuantizeRow(GgmlType::kQ2_K, odd, q2).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvault
