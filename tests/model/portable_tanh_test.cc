#include "model/portable_tanh.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kvault {
namespace {

struct Case {
  float x;
  float want;  // x86-64 glibc 2.36 (the recorded goldens' libm)
};

// Recorded from x86-64 glibc 2.36's tanhf. The first three are inputs where
// aarch64's build of the same glibc gives one ulp less; the fourth where
// tanhf is not correctly rounded ((float)tanh((double)x) is one ulp less).
constexpr Case kTanh[] = {
    {0x1.83268ap-8f, 0x1.832562p-8f},
    {0x1.8c31aep-8f, 0x1.8c3072p-8f},
    {0x1.ecd316p-8f, 0x1.ecd0b4p-8f},
    {0x1.000002p-25f, 0x1.000004p-25f},
    {0x1p-1f, 0x1.d9353ep-2f},
    {-0x1.8p-1f, -0x1.45323ep-1f},
    {0x1p+0f, 0x1.85efacp-1f},
    {0x1.8p+0f, 0x1.cf6f98p-1f},
    {-0x1.ap+1f, -0x1.fe767ap-1f},
    {0x1.1cccccp+3f, 0x1.fffffep-1f},
    {0x1.5e6666p+4f, 0x1p+0f},
    {0x1.7p+4f, 0x1p+0f},
    {0x1p-60f, 0x1p-60f},
    {-0x1p-30f, -0x1p-30f},
};

// Recorded from x86-64 glibc 2.36's expm1f, one input per branch (k = 0,
// +-1, 2 <= k < 23, k >= 23, k <= -2, saturated, tiny).
constexpr Case kExpm1[] = {
    {-0x1.99999ap-3f, -0x1.733d4ap-3f},
    {0x1.99999ap-2f, 0x1.f7a0e4p-2f},
    {0x1.333334p-1f, 0x1.a4ecc4p-1f},
    {-0x1.333334p-1f, -0x1.ce0454p-2f},
    {0x1.333334p+0f, 0x1.28f998p+1f},
    {0x1.4p+2f, 0x1.26d38ap+7f},
    {-0x1.4p+2f, -0x1.fc8cd8p-1f},
    {0x1.ep+4f, 0x1.37047p+43f},
    {0x1.4p+6f, 0x1.55779cp+115f},
    {-0x1.4p+4f, -0x1p+0f},
    {0x1p-26f, 0x1p-26f},
};

TEST(PortableTanhTest, GivesTheRecordedLibraryBits) {
  for (const Case& c : kTanh) {
    EXPECT_EQ(std::bit_cast<uint32_t>(PortableTanh(c.x)),
              std::bit_cast<uint32_t>(c.want))
        << "tanh(" << std::hexfloat << c.x << ")";
  }
  for (const Case& c : kExpm1) {
    EXPECT_EQ(std::bit_cast<uint32_t>(PortableExpm1(c.x)),
              std::bit_cast<uint32_t>(c.want))
        << "expm1(" << std::hexfloat << c.x << ")";
  }
}

TEST(PortableTanhTest, IsOddAndWithinThreeUlpsOfTheTrueValue) {
  // Every 4099th float in (0, 22]: sign symmetry and accuracy.
  for (uint32_t bits = 1; bits <= 0x41b00000u; bits += 4099) {
    const float x = std::bit_cast<float>(bits);
    const float got = PortableTanh(x);
    ASSERT_EQ(PortableTanh(-x), -got) << std::hexfloat << x;
    const double exact = std::tanh(static_cast<double>(x));
    const float ulp = std::nextafter(static_cast<float>(exact), 2.0f) -
                      static_cast<float>(exact);
    ASSERT_LE(std::abs(got - exact), 3.0 * ulp) << std::hexfloat << x;
  }
}

TEST(PortableTanhTest, HandlesZerosInfinitiesAndNan) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(std::bit_cast<uint32_t>(PortableTanh(-0.0f)),
            std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(PortableTanh(kInf), 1.0f);
  EXPECT_EQ(PortableTanh(-kInf), -1.0f);
  EXPECT_TRUE(std::isnan(PortableTanh(std::nanf(""))));
  EXPECT_EQ(PortableExpm1(kInf), kInf);
  EXPECT_EQ(PortableExpm1(-kInf), -1.0f);
  EXPECT_EQ(PortableExpm1(100.0f), kInf);
  EXPECT_TRUE(std::isnan(PortableExpm1(std::nanf(""))));
}

}  // namespace
}  // namespace kvault
