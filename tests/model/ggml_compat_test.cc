// Tests ggml_compat through ComputeBackend (the forward pass's way in):
// the vectorised implementations give the portable reference's bits, the
// documented summation orders hold on inputs where order is visible, and
// results stay close to a double-precision answer.
#include "model/ggml_compat.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/float16.h"
#include "model/compute_backend.h"

namespace kvault {
namespace {

using ggml_compat::DotOrder;

// A weight matrix [rows, cols] of type F32 or F16 with random values.
struct Weights {
  std::vector<std::byte> bytes;
  kernels::MatrixView view;
  std::vector<float> values;  // [rows, cols] as the kernel reads them
};

Weights MakeWeights(GgmlType type, int64_t rows, int64_t cols,
                    std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Weights w;
  const size_t elem = type == GgmlType::kF16 ? 2 : 4;
  w.bytes.resize(rows * cols * elem);
  w.values.resize(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = dist(rng);
    if (type == GgmlType::kF16) {
      const uint16_t h = FloatToHalf(v);
      std::memcpy(&w.bytes[2 * i], &h, 2);
      v = HalfToFloat(h);
    } else {
      std::memcpy(&w.bytes[4 * i], &v, 4);
    }
    w.values[i] = v;
  }
  w.view = {type, rows, cols, w.bytes.data(), cols * elem};
  return w;
}

std::vector<float> RandomVector(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Backends of the portable reference and of the CPU's best set, one and
// three threads (the pool splits rows into tasks), in the AVX2 build's
// numerics (ggml_matmul_test.cc compares the builds).
class GgmlCompatTest : public ::testing::Test {
 protected:
  // y = W x on `backend`.
  static std::vector<float> MatMul(const ComputeBackend& backend,
                                   const Weights& w,
                                   const std::vector<float>& x,
                                   const std::vector<DotOrder>& order) {
    std::vector<float> y(order.size() * w.view.rows, -1.0f);
    backend.MatMul(w.view, x.data(), order, y.data());
    return y;
  }

  // Runs MatMul portable and (where the CPU has it) vectorised, with and
  // without a pool; all must agree bit for bit.
  std::vector<float> MatMulBothWays(const Weights& w,
                                    const std::vector<float>& x,
                                    const std::vector<DotOrder>& order) {
    const std::vector<float> ref = MatMul(portable_, w, x, order);
    for (const ComputeBackend* b : {&best_, &best_threads_}) {
      const std::vector<float> got = MatMul(*b, w, x, order);
      EXPECT_EQ(0,
                std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
          << "vectorised MatMul differs from the portable one";
    }
    return ref;
  }

  static constexpr ggml_compat::GgmlBuild kBuild =
      ggml_compat::GgmlBuild::kAvx2;
  const ComputeBackend portable_{
      {.isa = kernels::Isa::kScalar, .ggml_build = kBuild}};
  const ComputeBackend best_{{.ggml_build = kBuild}};
  const ComputeBackend best_threads_{{.num_threads = 3, .ggml_build = kBuild}};
};

TEST_F(GgmlCompatTest, MatMulVectorisedMatchesPortableAndIsAccurate) {
  uint32_t seed = 7;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    // 1040: several of the blocked code's 512-value chunks, and a tail.
    for (int64_t cols : {8, 40, 64, 172, 256, 1040}) {
      ++seed;
      SCOPED_TRACE(testing::Message()
                   << "seed " << seed << " type " << static_cast<int>(type)
                   << " cols " << cols);
      std::mt19937 rng(seed);
      const int64_t rows = 70;  // not a multiple of 4 or of a task's rows
      const Weights w = MakeWeights(type, rows, cols, rng);
      // Four kGemm tokens: a triple and a single in the blocked code.
      const std::vector<DotOrder> order = {DotOrder::kGemm, DotOrder::kGemv,
                                           DotOrder::kGemm, DotOrder::kGemm,
                                           DotOrder::kGemm};
      const std::vector<float> x = RandomVector(order.size() * cols, rng, 1);
      const std::vector<float> y = MatMulBothWays(w, x, order);
      for (size_t t = 0; t < order.size(); ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t c = 0; c < cols; ++c) {
            float xv = x[t * cols + c];
            if (type == GgmlType::kF16) xv = HalfToFloat(FloatToHalf(xv));
            want += double{w.values[r * cols + c]} * xv;
          }
          ASSERT_NEAR(y[t * rows + r], want, 1e-4 * std::sqrt(cols))
              << "token " << t << " row " << r;
        }
      }
    }
  }
}

// The AVX-512 tiles (8 or 4 rows x up to 6 tokens, k in 512-value chunks)
// give the AVX2 blocked code's bits and the portable reference's, in both
// builds' orders, for batch sizes covering every partial token tile, row
// counts with partial row tiles (and 6: no kGemm at all), with and without
// a pool (which splits rows into tasks). 72 values: not a multiple of 16,
// so the AVX-512 build's kGemm falls back to its kGemv.
TEST_F(GgmlCompatTest, Avx512TilesMatchAvx2AndPortableBitForBit) {
  uint32_t seed = 1000;
  for (ggml_compat::GgmlBuild build :
       {ggml_compat::GgmlBuild::kAvx2, ggml_compat::GgmlBuild::kAvx512}) {
    const ComputeBackend portable(
        {.isa = kernels::Isa::kScalar, .ggml_build = build});
    const ComputeBackend avx2_only({.ggml_avx512 = false, .ggml_build = build});
    const ComputeBackend avx2_only_threads(
        {.num_threads = 3, .ggml_avx512 = false, .ggml_build = build});
    const ComputeBackend best({.ggml_build = build});
    const ComputeBackend best_threads({.num_threads = 3, .ggml_build = build});
    const ComputeBackend* const kBackends[] = {&avx2_only, &avx2_only_threads,
                                               &best, &best_threads};
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
      for (int64_t cols : {16, 72, 1040}) {
        for (int64_t rows : {4, 6, 12, 76, 136}) {
          for (size_t n : {1, 2, 5, 6, 7, 13}) {
            ++seed;
            SCOPED_TRACE(testing::Message()
                         << "seed " << seed << " build "
                         << static_cast<int>(build) << " type "
                         << static_cast<int>(type) << " cols " << cols
                         << " rows " << rows << " n " << n);
            std::mt19937 rng(seed);
            const Weights w = MakeWeights(type, rows, cols, rng);
            std::vector<DotOrder> order(n, DotOrder::kGemm);
            if (n > 2) order[1] = DotOrder::kGemv;
            const std::vector<float> x = RandomVector(n * cols, rng, 1);
            const std::vector<float> ref = MatMul(portable, w, x, order);
            for (const ComputeBackend* b : kBackends) {
              const std::vector<float> got = MatMul(*b, w, x, order);
              ASSERT_EQ(0, std::memcmp(got.data(), ref.data(),
                                       ref.size() * sizeof(float)))
                  << "avx512 " << b->options().ggml_avx512 << " threads "
                  << b->options().num_threads;
            }
          }
        }
      }
    }
  }
}

TEST_F(GgmlCompatTest, TokenResultDependsOnlyOnItsOrder) {
  std::mt19937 rng(99);
  const Weights w = MakeWeights(GgmlType::kF32, 12, 64, rng);
  const std::vector<float> x = RandomVector(64, rng, 1);
  const std::vector<float> alone_gemv = MatMul(best_, w, x, {DotOrder::kGemv});
  const std::vector<float> alone_gemm = MatMul(best_, w, x, {DotOrder::kGemm});
  // The same token second in a batch of three gives the same bits.
  std::vector<float> xs = RandomVector(3 * 64, rng, 1);
  std::copy(x.begin(), x.end(), xs.begin() + 64);
  for (DotOrder o : {DotOrder::kGemv, DotOrder::kGemm}) {
    const std::vector<float> y =
        MatMul(best_, w, xs, {DotOrder::kGemm, o, DotOrder::kGemv});
    const std::vector<float>& want =
        o == DotOrder::kGemv ? alone_gemv : alone_gemm;
    EXPECT_EQ(0, std::memcmp(&y[12], want.data(), 12 * sizeof(float)));
  }
}

// Values whose float sum depends on the association order: 2^24 + 1 - 2^24
// is 0 or 1 depending on which pair is added first.
TEST_F(GgmlCompatTest, SummationOrdersAreGgmls) {
  const float big = 16777216.0f;  // 2^24
  std::vector<float> w(32, 0.0f), x(32, 1.0f);
  // kGemm: lane i accumulates values i and i + 8; lanes are summed as
  // (l0 + l4) + (l2 + l6) + ... ((t0 + t2) + (t1 + t3), t_i = l_i + l_i+4).
  w[0] = big;
  w[4] = 1.0f;
  w[2] = -big;
  // Four equal rows: tinyBLAS refuses a row count not a multiple of 4.
  std::vector<std::byte> bytes(4 * 32 * 4);
  for (int r = 0; r < 4; ++r) {
    std::memcpy(&bytes[r * 32 * 4], w.data(), 32 * 4);
  }
  kernels::MatrixView view{GgmlType::kF32, 4, 32, bytes.data(), 32 * 4};
  for (bool portable : {true, false}) {
    const ComputeBackend& backend = portable ? portable_ : best_;
    std::vector<float> y(4, -1);
    backend.MatMul(view, x.data(), std::vector{DotOrder::kGemm}, y.data());
    // t0 = big + 1 = big (rounded), t2 = -big: sum 0; a left-to-right sum
    // would give 1.
    EXPECT_EQ(y, std::vector<float>(4, 0.0f)) << "portable " << portable;
    // kGemv (one 32-value step): lanes reduced (t0 + t1) + (t2 + t3) with
    // t_i = l_i + l_i+4: t0 = big + 1 -> big, t2 = -big: 0 again.
    std::vector<float> g(4, -1);
    backend.MatMul(view, x.data(), std::vector{DotOrder::kGemv}, g.data());
    EXPECT_EQ(g, std::vector<float>(4, 0.0f)) << "portable " << portable;
  }
}

TEST_F(GgmlCompatTest, F32TailIsUnfused) {
  // cols 33: one 32-value step, then a tail of one value.
  std::vector<float> w(33, 0.0f), x(33, 0.0f);
  w[0] = -1.0f;
  x[0] = 1.0f;
  // Product 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11; an FMA onto -1 would
  // keep the 2^-24.
  w[32] = 1.0f + 0x1p-12f;
  x[32] = 1.0f + 0x1p-12f;
  std::vector<std::byte> bytes(33 * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());
  kernels::MatrixView view{GgmlType::kF32, 1, 33, bytes.data(), 33 * 4};
  for (bool portable : {true, false}) {
    const ComputeBackend& backend = portable ? portable_ : best_;
    float y = -1;
    backend.MatMul(view, x.data(), std::vector{DotOrder::kGemv}, &y);
    const float product = w[32] * x[32];  // rounded first: unfused
    EXPECT_EQ(y, -1.0f + product) << "portable " << portable;
    EXPECT_NE(y, std::fma(w[32], x[32], -1.0f));
  }
}

TEST_F(GgmlCompatTest, SwiGluVectorisedMatchesPortableAndIsAccurate) {
  using ggml_compat::GgmlBuild;
  std::mt19937 rng(5);
  for (GgmlBuild build : {GgmlBuild::kAvx2, GgmlBuild::kAvx512}) {
    for (int64_t n : {1, 8, 13, 16, 40, 172}) {
      std::vector<float> gate = RandomVector(n, rng, 4);
      // Arguments where ggml_v_expf leaves its polynomial range.
      gate[0] = -100.0f;
      if (n > 1) gate[1] = 120.0f;
      if (n > 2) gate[2] = -200.0f;
      const std::vector<float> up = RandomVector(n, rng, 1);
      std::vector<float> ref(n), got(n);
      const ComputeBackend portable(
          {.isa = kernels::Isa::kScalar, .ggml_build = build});
      const ComputeBackend best({.ggml_build = build});
      portable.SwiGlu(gate.data(), up.data(), n, ref.data());
      best.SwiGlu(gate.data(), up.data(), n, got.data());
      EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), n * sizeof(float)))
          << "n " << n << " build " << static_cast<int>(build);
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        EXPECT_NEAR(ref[i], want, 1e-5 * (1 + std::abs(want))) << "i " << i;
      }
    }
  }
}

// The two builds' exp forms round differently: over many arguments some
// results differ in the last bits (which is why the build is a setting).
TEST_F(GgmlCompatTest, SwiGluBuildsDifferInTheLastBits) {
  using ggml_compat::GgmlBuild;
  std::mt19937 rng(9);
  const int64_t n = 4096;
  const std::vector<float> gate = RandomVector(n, rng, 4);
  const std::vector<float> up(n, 1.0f);
  std::vector<float> avx2(n), avx512(n);
  const ComputeBackend avx2_build({.ggml_build = GgmlBuild::kAvx2});
  const ComputeBackend avx512_build({.ggml_build = GgmlBuild::kAvx512});
  avx2_build.SwiGlu(gate.data(), up.data(), n, avx2.data());
  avx512_build.SwiGlu(gate.data(), up.data(), n, avx512.data());
  int64_t num_different = 0;
  for (int64_t i = 0; i < n; ++i) {
    num_different += avx2[i] != avx512[i];
    EXPECT_NEAR(avx2[i], avx512[i], 1e-6 * (1 + std::abs(avx2[i])));
  }
  EXPECT_GT(num_different, 0);
}

TEST_F(GgmlCompatTest, RmsNormSumsFloatSquaresInDouble) {
  std::mt19937 rng(3);
  const std::vector<float> x = RandomVector(64, rng, 2);
  const std::vector<float> w = RandomVector(64, rng, 1);
  std::vector<float> out(64);
  ggml_compat::RmsNorm(x.data(), w.data(), 64, 1e-5f, out.data());
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v * v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / 64.0) + 1e-5f);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], (x[i] * scale) * w[i]);
}

TEST_F(GgmlCompatTest, DotF16OfAvx2BuildMatchesMatMulGemvOnOneRow) {
  std::mt19937 rng(11);
  for (int64_t n : {8, 16, 40, 64, 128}) {
    const Weights k = MakeWeights(GgmlType::kF16, 1, n, rng);
    std::vector<float> q = RandomVector(n, rng, 1);
    for (float& v : q) v = HalfToFloat(FloatToHalf(v));
    for (const ComputeBackend* b : {&portable_, &best_}) {
      float via_matmul = 0;
      b->MatMul(k.view, q.data(), std::vector{DotOrder::kGemv}, &via_matmul);
      EXPECT_EQ(
          ggml_compat::DotF16(k.bytes.data(), q.data(), n,
                              ggml_compat::GgmlBuild::kAvx2, b->options().isa),
          via_matmul)
          << "n " << n;
    }
  }
}

// An AVX-512 build's order: every kernel set gives the portable form's
// bits; under 32 values (all in the double tail) it is the AVX2 build's
// sum, and from 64 on its own (the orders differ on some of these rows).
TEST_F(GgmlCompatTest, DotF16OfAvx512BuildSameOnEveryIsa) {
  using ggml_compat::GgmlBuild;
  std::mt19937 rng(12);
  for (int64_t n : {8, 24, 40, 64, 96, 128, 256}) {
    int differ = 0;
    for (int row = 0; row < 20; ++row) {
      const Weights k = MakeWeights(GgmlType::kF16, 1, n, rng);
      std::vector<float> q = RandomVector(n, rng, 1);
      for (float& v : q) v = HalfToFloat(FloatToHalf(v));
      const float want =
          ggml_compat::DotF16(k.bytes.data(), q.data(), n, GgmlBuild::kAvx512,
                              kernels::Isa::kScalar);
      for (kernels::Isa isa : kernels::SupportedIsas()) {
        EXPECT_EQ(std::bit_cast<uint32_t>(ggml_compat::DotF16(
                      k.bytes.data(), q.data(), n, GgmlBuild::kAvx512, isa)),
                  std::bit_cast<uint32_t>(want))
            << "n " << n << " isa " << kernels::IsaName(isa);
      }
      const float avx2 = ggml_compat::DotF16(
          k.bytes.data(), q.data(), n, GgmlBuild::kAvx2, kernels::Isa::kScalar);
      if (n < 32) {
        EXPECT_EQ(avx2, want) << "n " << n;
      }
      differ += avx2 != want;
    }
    if (n >= 64) {
      EXPECT_GT(differ, 0) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace kvault
