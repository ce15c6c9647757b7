// The vector kernels (norm, softmax, SiLU, dot/axpy over f32 and f16) of
// every instruction set against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/float16.h"
#include "kv/kv_dtype.h"
#include "model/kernels/kernels.h"
#include "model/kernels/quant_scalar.h"

namespace kvault::kernels {
namespace {

constexpr int64_t kSizes[] = {1, 7, 8, 15, 16, 17, 64, 100, 4096 + 3};

std::vector<float> RandomVector(int64_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::byte> ToHalves(const std::vector<float>& v) {
  std::vector<std::byte> h(2 * v.size());
  FloatToHalfRow(v, h);
  return h;
}

// The reference every SIMD set is compared with.
const Kernels kScalar(Isa::kScalar);

// Runs `body(simd, n, rng)` for every SIMD set's kernels and size, seeded
// per case.
void ForEachIsaAndSize(
    const std::function<void(const Kernels&, int64_t, std::mt19937&)>& body) {
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar) continue;
    const std::string_view name = IsaName(isa);
    for (int64_t n : kSizes) {
      const uint32_t seed = static_cast<uint32_t>(n * 7 + name.size());
      SCOPED_TRACE(std::string(name) + " n " + std::to_string(n) + " seed " +
                   std::to_string(seed));
      std::mt19937 rng(seed);
      body(Kernels(isa), n, rng);
    }
  }
}

void ExpectAllNear(const std::vector<float>& got,
                   const std::vector<float>& want, float rel, float abs) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + abs) << "i=" << i;
  }
}

TEST(KernelsVectorTest, DotF32AndDotF16F32) {
  ForEachIsaAndSize([](const Kernels& simd, int64_t n, std::mt19937& rng) {
    const std::vector<float> a = RandomVector(n, rng, 1.0f);
    const std::vector<float> b = RandomVector(n, rng, 1.0f);
    const std::vector<std::byte> ah = ToHalves(a);
    const float want32 = kScalar.DotF32(a.data(), b.data(), n);
    const float want16 = kScalar.DotF16F32(ah.data(), b.data(), n);
    const float tol = 1e-6f * static_cast<float>(n) + 1e-6f;
    EXPECT_NEAR(simd.DotF32(a.data(), b.data(), n), want32, tol);
    EXPECT_NEAR(simd.DotF16F32(ah.data(), b.data(), n), want16, tol);
  });
}

TEST(KernelsVectorTest, AxpyAndAxpyF16) {
  ForEachIsaAndSize([](const Kernels& simd, int64_t n, std::mt19937& rng) {
    const std::vector<float> x = RandomVector(n, rng, 1.0f);
    const std::vector<float> y0 = RandomVector(n, rng, 1.0f);
    const std::vector<std::byte> xh = ToHalves(x);
    std::vector<float> want = y0, want16 = y0;
    kScalar.Axpy(0.37f, x.data(), n, want.data());
    kScalar.AxpyF16(-1.5f, xh.data(), n, want16.data());
    std::vector<float> got = y0, got16 = y0;
    simd.Axpy(0.37f, x.data(), n, got.data());
    simd.AxpyF16(-1.5f, xh.data(), n, got16.data());
    ExpectAllNear(got, want, 1e-6f, 1e-6f);
    ExpectAllNear(got16, want16, 1e-6f, 1e-6f);
  });
}

TEST(KernelsVectorTest, RmsNorm) {
  ForEachIsaAndSize([](const Kernels& simd, int64_t n, std::mt19937& rng) {
    const std::vector<float> x = RandomVector(n, rng, 4.0f);
    const std::vector<float> w = RandomVector(n, rng, 2.0f);
    std::vector<float> want(n), got(n);
    kScalar.RmsNorm(x.data(), w.data(), n, 1e-5f, want.data());
    simd.RmsNorm(x.data(), w.data(), n, 1e-5f, got.data());
    ExpectAllNear(got, want, 1e-5f, 1e-6f);
  });
}

TEST(KernelsVectorTest, SoftmaxAndSiluMul) {
  ForEachIsaAndSize([](const Kernels& simd, int64_t n, std::mt19937& rng) {
    std::vector<float> logits = RandomVector(n, rng, 20.0f);
    if (n > 2) logits[n / 2] = -std::numeric_limits<float>::infinity();
    const std::vector<float> gate = RandomVector(n, rng, 30.0f);
    const std::vector<float> up = RandomVector(n, rng, 2.0f);
    std::vector<float> want = logits, got = logits;
    std::vector<float> want_silu(n), got_silu(n);
    kScalar.Softmax(want.data(), n);
    kScalar.SiluMul(gate.data(), up.data(), n, want_silu.data());
    simd.Softmax(got.data(), n);
    simd.SiluMul(gate.data(), up.data(), n, got_silu.data());
    ExpectAllNear(got, want, 2e-6f, 1e-9f);
    if (n > 2) {
      EXPECT_EQ(got[n / 2], 0.0f);  // a masked entry is exactly 0
    }
    ExpectAllNear(got_silu, want_silu, 2e-6f, 1e-7f);
  });
}

TEST(KernelsVectorTest, SoftmaxKnownValues) {
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(std::string(IsaName(isa)));
    const Kernels simd(isa);
    std::vector<float> x(11, 0.0f);
    x[3] = std::log(3.0f);  // weights 1 x 10, 3 x 1 -> 1/13, 3/13
    simd.Softmax(x.data(), 11);
    EXPECT_NEAR(x[0], 1.0f / 13, 1e-6f);
    EXPECT_NEAR(x[3], 3.0f / 13, 1e-6f);
    float silu = 0;
    const float g = 2.0f, u = 3.0f;
    simd.SiluMul(&g, &u, 1, &silu);
    EXPECT_NEAR(silu, 2.0f / (1.0f + std::exp(-2.0f)) * 3.0f, 1e-6f);
  }
}

// Quantizing activations must give kv's scalar bytes exactly (the SIMD
// rounding is a re-derivation of std::round, so probe its edge cases: exact
// .5 ties, values next to them, zeros, infinities, NaNs, huge and tiny).
TEST(KernelsVectorTest, QuantizeQ8_0BitIdenticalToScalar) {
  for (Isa isa : SupportedIsas()) {
    const Kernels simd(isa);
    const std::string_view name = IsaName(isa);
    for (int64_t num_blocks : {1, 2, 3, 7, 64}) {
      const uint32_t seed =
          static_cast<uint32_t>(num_blocks * 13 + name.size());
      SCOPED_TRACE(std::string(name) + " blocks " + std::to_string(num_blocks) +
                   " seed " + std::to_string(seed));
      std::mt19937 rng(seed);
      const int64_t n = num_blocks * 32;
      std::vector<float> x = RandomVector(n, rng, 3.0f);
      // Block 0: a max of 127 makes d = 1, so x * id hits ties exactly.
      for (int64_t i = 0; i < 32 && i < n; ++i) {
        x[i] = static_cast<float>(i % 16) - 7.5f;
      }
      x[0] = 127.0f;
      x[1] = std::nextafter(2.5f, 0.0f);
      x[2] = std::nextafter(-2.5f, 0.0f);
      x[3] = -0.0f;
      x[4] = 0.49999997f;
      if (num_blocks > 1) {
        const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  1e-40f,
                                  -1e38f,
                                  1e38f};
        for (size_t i = 0; i < std::size(specials); ++i) {
          x[32 + 3 * i] = specials[i];
        }
      }
      if (num_blocks > 2) {  // an all-zero block (d = 0)
        for (int64_t i = 64; i < 96; ++i) x[i] = 0.0f;
      }
      std::vector<std::byte> want(num_blocks * 34), got(num_blocks * 34);
      QuantizeRowQ8_0Act(x.data(), n, want.data());
      simd.QuantizeQ8_0(x.data(), n, got.data());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "byte " << i;
      }
    }
  }
}

// Every float of a block scaled so that x * id sweeps many values around
// each .5 tie (random magnitudes make id inexact).
TEST(KernelsVectorTest, QuantizeQ8_0ManyRandomScales) {
  for (Isa isa : SupportedIsas()) {
    const Kernels simd(isa);
    const uint32_t seed = 99;
    SCOPED_TRACE(std::string(IsaName(isa)) + " seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> scale_dist(-20.0f, 20.0f);
    const int64_t n = 32 * 512;
    std::vector<float> x(n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float scale = std::exp2(scale_dist(rng));
      std::uniform_int_distribution<int> half_steps(-254, 254);
      for (int64_t i = 0; i < 32; ++i) {
        x[b * 32 + i] = scale * (half_steps(rng) * 0.5f);
      }
    }
    std::vector<std::byte> want(n / 32 * 34), got(n / 32 * 34);
    QuantizeRowQ8_0Act(x.data(), n, want.data());
    simd.QuantizeQ8_0(x.data(), n, got.data());
    ASSERT_EQ(got, want);
  }
}

// ExpF32 against std::exp over the range attention uses (scores minus a
// running max: <= 0), plus large positives, -inf and underflow; and each
// output must not depend on where in the row (vector body or tail) it sits.
TEST(KernelsVectorTest, ExpF32) {
  ForEachIsaAndSize([](const Kernels& simd, int64_t n, std::mt19937& rng) {
    std::vector<float> x = RandomVector(n, rng, 40.0f);
    for (float& v : x) v -= 30.0f;  // mostly negative, some up to +10
    if (n > 3) {
      x[0] = -std::numeric_limits<float>::infinity();
      x[1] = -100.0f;
      x[2] = 0.0f;
    }
    std::vector<float> want(n), got(n), in_place = x;
    kScalar.ExpF32(x.data(), n, want.data());
    simd.ExpF32(x.data(), n, got.data());
    ExpectAllNear(got, want, 3e-7f, 1e-37f);  // SIMD flushes e^-87.3 and below
    if (n > 3) {
      EXPECT_EQ(got[0], 0.0f);
      EXPECT_EQ(got[1], 0.0f);
      EXPECT_EQ(got[2], 1.0f);
    }
    simd.ExpF32(in_place.data(), n, in_place.data());
    EXPECT_EQ(in_place, got);
    for (int64_t i = 0; i < n; ++i) {  // one at a time: the tail path
      float one = 0.0f;
      simd.ExpF32(&x[i], 1, &one);
      ASSERT_EQ(one, got[i]) << "i=" << i;
    }
  });
}

}  // namespace
}  // namespace kvault::kernels
