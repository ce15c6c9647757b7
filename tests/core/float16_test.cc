#include "core/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kvault {
namespace {

bool IsHalfNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }

// Independent reference: rounds with the FPU in double precision (exact for
// every float input), ties to even via nearbyint.
uint16_t ReferenceFloatToHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7C00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal range: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // a = m' * 2^e, m' in [1, 2)
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // in [1024, 2048]
  if (m == 2048) {
    m = 1024;
    ++e;
  }
  if (e > 15) return sign | 0x7C00;
  return sign |
         static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(m) - 1024));
}

TEST(Float16Test, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float f = HalfToFloat(half);
    if (IsHalfNan(half)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(FloatToHalf(f), half | 0x200) << h;  // quieted
    } else {
      ASSERT_EQ(FloatToHalf(f), half) << "half 0x" << std::hex << h;
    }
  }
}

TEST(Float16Test, KnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // min normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
}

TEST(Float16Test, RoundsToNearestTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);         // half ulp spacing at 1.0
  EXPECT_EQ(FloatToHalf(1.0f + ulp / 2), 0x3C00);  // tie -> even (down)
  EXPECT_EQ(FloatToHalf(1.0f + 3 * ulp / 2), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3C01);
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + ulp / 2, 0.0f)), 0x3C00);
  EXPECT_EQ(FloatToHalf(-(1.0f + 3 * ulp / 2)), 0xBC02);
  // 2047/1024 rounded at the last place carries into the exponent.
  EXPECT_EQ(FloatToHalf(2.0f - ulp / 4), 0x4000);
}

TEST(Float16Test, OverflowGoesToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // tie rounds to even = 2^16
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(inf), 0x7C00);
  EXPECT_EQ(FloatToHalf(-inf), 0xFC00);
  EXPECT_EQ(HalfToFloat(0x7C00), inf);
  EXPECT_EQ(HalfToFloat(0xFC00), -inf);
}

TEST(Float16Test, SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.0f, -24);
  EXPECT_EQ(FloatToHalf(tiny / 2), 0x0000);  // tie -> even zero
  EXPECT_EQ(FloatToHalf(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(-tiny / 2), 0x8000);
  EXPECT_EQ(FloatToHalf(1.5f * tiny), 0x0002);  // tie -> even
  EXPECT_EQ(FloatToHalf(2.5f * tiny), 0x0002);  // tie -> even
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Largest subnormal + a half ulp ties up to the smallest normal.
  EXPECT_EQ(FloatToHalf(1023.5f * tiny), 0x0400);
  EXPECT_EQ(FloatToHalf(1022.5f * tiny), 0x03FE);
}

TEST(Float16Test, NanStaysNanAndKeepsSign) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FloatToHalf(qnan), 0x7E00);
  EXPECT_EQ(FloatToHalf(-qnan), 0xFE00);
  // A signalling NaN whose payload lives only in the low bits stays NaN.
  EXPECT_TRUE(IsHalfNan(FloatToHalf(std::bit_cast<float>(0x7F800001u))));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFE00)));
  EXPECT_TRUE(std::signbit(HalfToFloat(0xFE00)));
}

TEST(Float16Test, MatchesDoubleReferenceOnSampledFloats) {
  // Every 997th bit pattern, plus a dense random sample: ~8M conversions.
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 997) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), ReferenceFloatToHalf(f))
        << "float bits 0x" << std::hex << bits;
  }
  const uint32_t seed = 20240611;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float f = dist(rng) * std::ldexp(1.0f, -(i % 30));
    ASSERT_EQ(FloatToHalf(f), ReferenceFloatToHalf(f))
        << "seed " << seed << " value " << f;
  }
}

std::vector<float> SpecialAndRandomFloats(uint32_t seed, size_t n) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          65504.0f,
                          65520.0f,
                          1e-8f,
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::bit_cast<float>(0xFF800123u)};
  std::mt19937 rng(seed);
  while (v.size() < n)
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

TEST(Float16Test, RowPathsAgreeBitForBit) {
  const uint32_t seed = 7;
  SCOPED_TRACE("seed " + std::to_string(seed) + ", f16c " +
               std::to_string(Float16UsesF16c()));
  const std::vector<float> src = SpecialAndRandomFloats(seed, 100003);
  // Odd offset: rows must work at any alignment.
  std::vector<std::byte> fast(2 * src.size() + 1), slow(2 * src.size());
  std::span<std::byte> fast_row(fast.data() + 1, 2 * src.size());
  FloatToHalfRow(src, fast_row);
  FloatToHalfRowPortable(src, slow);
  ASSERT_EQ(std::memcmp(fast_row.data(), slow.data(), slow.size()), 0);
  for (size_t i = 0; i < src.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, slow.data() + 2 * i, 2);
    ASSERT_EQ(h, FloatToHalf(src[i])) << i;
  }
  std::vector<float> back_fast(src.size()), back_slow(src.size());
  HalfToFloatRow(fast_row, back_fast);
  HalfToFloatRowPortable(slow, back_slow);
  ASSERT_EQ(std::memcmp(back_fast.data(), back_slow.data(),
                        back_slow.size() * sizeof(float)),
            0);
}

TEST(Float16Test, RowPathsAgreeOnEveryHalf) {
  std::vector<std::byte> halves(2 * 65536);
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    std::memcpy(halves.data() + 2 * h, &half, 2);
  }
  std::vector<float> fast(65536), slow(65536);
  HalfToFloatRow(halves, fast);
  HalfToFloatRowPortable(halves, slow);
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(fast[h]),
              std::bit_cast<uint32_t>(slow[h]))
        << "half 0x" << std::hex << h;
  }
}

TEST(Float16DeathTest, RowSizeMismatchDies) {
  std::vector<float> src(4);
  std::vector<std::byte> dst(7);
  EXPECT_DEATH(FloatToHalfRow(src, dst), "check failed");
  EXPECT_DEATH(HalfToFloatRow(dst, src), "check failed");
}

}  // namespace
}  // namespace kvault
