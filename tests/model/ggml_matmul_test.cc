// Tests ggml_compat::MatMul's two builds' summation orders (through
// ComputeBackend): every kernel set gives the portable reference's bits in
// both, the orders are the documented ones on inputs where order is
// visible, they differ between the builds, and tinyBLAS's refusals fall
// back to kGemv. ggml_compat_test.cc covers the AVX2 build in more depth.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/float16.h"
#include "model/compute_backend.h"
#include "model/ggml_compat.h"

namespace kvault {
namespace {

using ggml_compat::DotOrder;
using ggml_compat::GgmlBuild;

constexpr GgmlBuild kBuilds[] = {GgmlBuild::kAvx2, GgmlBuild::kAvx512};

// A weight matrix [rows, cols] of type F32 or F16.
struct Weights {
  std::vector<std::byte> bytes;
  kernels::MatrixView view;
  std::vector<float> values;  // [rows, cols] as the kernel reads them
};

Weights MakeWeights(GgmlType type, int64_t rows, int64_t cols,
                    const std::vector<float>& values) {
  Weights w;
  const size_t elem = type == GgmlType::kF16 ? 2 : 4;
  w.bytes.resize(rows * cols * elem);
  w.values = values;
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (type == GgmlType::kF16) {
      const uint16_t h = FloatToHalf(values[i]);
      std::memcpy(&w.bytes[2 * i], &h, 2);
      w.values[i] = HalfToFloat(h);
    } else {
      std::memcpy(&w.bytes[4 * i], &values[i], 4);
    }
  }
  w.view = {type, rows, cols, w.bytes.data(), cols * elem};
  return w;
}

std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> MatMul(const ComputeBackend& backend, const Weights& w,
                          const std::vector<float>& x,
                          const std::vector<DotOrder>& order) {
  std::vector<float> y(order.size() * w.view.rows, -1.0f);
  backend.MatMul(w.view, x.data(), order, y.data());
  return y;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// k values that leave a tail after the 32- and 64-value steps, are not a
// multiple of 8 or 16 (no tinyBLAS), or are (tinyBLAS in one build only,
// or both); rows with and without tinyBLAS (rows % 4), single tokens and
// batches mixing the orders.
TEST(GgmlMatMulTest, EveryKernelSetGivesThePortableBitsInBothBuilds) {
  uint32_t seed = 0;
  for (GgmlBuild build : kBuilds) {
    const ComputeBackend portable(
        {.isa = kernels::Isa::kScalar, .ggml_build = build});
    std::vector<std::unique_ptr<ComputeBackend>> vectorised;
    for (kernels::Isa isa : kernels::SupportedIsas()) {
      for (bool avx512 : {false, true}) {
        vectorised.push_back(
            std::make_unique<ComputeBackend>(ComputeBackendOptions{
                .isa = isa, .ggml_avx512 = avx512, .ggml_build = build}));
      }
    }
    vectorised.push_back(std::make_unique<ComputeBackend>(
        ComputeBackendOptions{.num_threads = 3, .ggml_build = build}));
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
      for (int64_t cols : {1, 15, 24, 40, 63, 65, 100, 176, 1056}) {
        for (int64_t rows : {4, 7, 12}) {
          // 100 tokens: more than one of the AVX2 kGemm's token spans.
          for (size_t n : {1, 4, 100}) {
            std::mt19937 rng(++seed);
            SCOPED_TRACE(testing::Message()
                         << "build " << static_cast<int>(build) << " type "
                         << static_cast<int>(type) << " cols " << cols
                         << " rows " << rows << " n " << n);
            const Weights w =
                MakeWeights(type, rows, cols, RandomVector(rows * cols, rng));
            std::vector<DotOrder> order(n, DotOrder::kGemm);
            if (n > 1) order[2] = DotOrder::kGemv;
            const std::vector<float> x = RandomVector(n * cols, rng);
            const std::vector<float> ref = MatMul(portable, w, x, order);
            for (const auto& b : vectorised) {
              EXPECT_TRUE(SameBits(MatMul(*b, w, x, order), ref))
                  << kernels::IsaName(b->options().isa) << " avx512 "
                  << b->options().ggml_avx512 << " threads "
                  << b->options().num_threads;
            }
            for (size_t t = 0; t < n; ++t) {
              for (int64_t r = 0; r < rows; ++r) {
                double want = 0;
                for (int64_t c = 0; c < cols; ++c) {
                  float xv = x[t * cols + c];
                  if (type == GgmlType::kF16) xv = HalfToFloat(FloatToHalf(xv));
                  want += double{w.values[r * cols + c]} * xv;
                }
                ASSERT_NEAR(ref[t * rows + r], want, 1e-5 * cols);
              }
            }
          }
        }
      }
    }
  }
}

// The same values summed in each build's order give different last bits
// on some of many rows, in both orders and both weight types (which is why
// the build is a setting).
TEST(GgmlMatMulTest, TheBuildsOrdersDiffer) {
  const ComputeBackend avx2({.ggml_build = GgmlBuild::kAvx2});
  const ComputeBackend avx512({.ggml_build = GgmlBuild::kAvx512});
  std::mt19937 rng(17);
  const int64_t rows = 256, cols = 256;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    const Weights w =
        MakeWeights(type, rows, cols, RandomVector(rows * cols, rng));
    const std::vector<float> x = RandomVector(2 * cols, rng);
    for (DotOrder o : {DotOrder::kGemv, DotOrder::kGemm}) {
      const std::vector<DotOrder> order(2, o);
      const std::vector<float> a = MatMul(avx2, w, x, order);
      const std::vector<float> b = MatMul(avx512, w, x, order);
      int num_different = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num_different += a[i] != b[i];
        EXPECT_NEAR(a[i], b[i], 1e-4);
      }
      EXPECT_GT(num_different, 0) << "type " << static_cast<int>(type)
                                  << " order " << static_cast<int>(o);
    }
  }
}

// y (4 equal rows of `values`, x all ones) in `order` on `backend`.
std::vector<float> SumOfRow(const ComputeBackend& backend,
                            const std::vector<float>& values, DotOrder order) {
  const int64_t cols = static_cast<int64_t>(values.size());
  std::vector<float> rows;
  for (int r = 0; r < 4; ++r)
    rows.insert(rows.end(), values.begin(), values.end());
  const Weights w = MakeWeights(GgmlType::kF32, 4, cols, rows);
  return MatMul(backend, w, std::vector<float>(cols, 1.0f), {order});
}

// Orders where 2^24 + 1 - 2^24 gives 0 or 1 depending on which pair is
// added first, worked out from ggml's code for each build.
TEST(GgmlMatMulTest, SummationOrdersAreEachBuilds) {
  const float big = 16777216.0f;  // 2^24: big + 1 rounds to big
  struct Case {
    DotOrder order;
    int64_t cols;
    int big_at, one_at, minus_big_at;
    float avx2, avx512;  // the sum each build's order gives
  };
  const Case kCases[] = {
      // kGemm, tinyBLAS: AVX2 lane 0 gets values 0, 8, 16, 24 in turn
      // (big + 1 -> big, then -big: 0); AVX-512 lane 0 values 0 and 16
      // (0), lane 8 value 8 (1).
      {DotOrder::kGemm, 32, 0, 8, 16, 0.0f, 1.0f},
      // kGemv: values 0, 1, 2 stay lanes 0, 1, 2 through the accumulator
      // and lane reductions; AVX2's hadds then add (l0 + l1) + (l2 + l3),
      // AVX-512's reduce (l0 + l2) + (l1 + l3).
      {DotOrder::kGemv, 64, 0, 1, 2, 0.0f, 1.0f},
      // kGemv, 32 values: a whole step for AVX2, all tail (left to
      // right) for AVX-512.
      {DotOrder::kGemv, 32, 0, 4, 2, 0.0f, 1.0f},
  };
  for (const Case& c : kCases) {
    std::vector<float> values(c.cols, 0.0f);
    values[c.big_at] = big;
    values[c.one_at] = 1.0f;
    values[c.minus_big_at] = -big;
    for (kernels::Isa isa : kernels::SupportedIsas()) {
      for (GgmlBuild build : kBuilds) {
        const ComputeBackend backend({.isa = isa, .ggml_build = build});
        const float want = build == GgmlBuild::kAvx2 ? c.avx2 : c.avx512;
        EXPECT_EQ(SumOfRow(backend, values, c.order),
                  std::vector<float>(4, want))
            << "cols " << c.cols << " order " << static_cast<int>(c.order)
            << " isa " << kernels::IsaName(isa) << " build "
            << static_cast<int>(build);
      }
    }
  }
}

// tinyBLAS refuses k not a multiple of its lanes (40: served by AVX2's 8,
// refused by AVX-512's 16) and row counts not a multiple of 4; then every
// token takes kGemv, as llama.cpp falls back to ggml_vec_dot.
TEST(GgmlMatMulTest, RefusedKGemmFallsBackToKGemv) {
  struct Shape {
    int64_t rows, cols;
    bool avx2_gemm, avx512_gemm;  // whether tinyBLAS serves it
  };
  std::mt19937 rng(23);
  for (const Shape& s : {Shape{64, 40, true, false}, Shape{6, 64, false, false},
                         Shape{64, 64, true, true}}) {
    const Weights w = MakeWeights(GgmlType::kF32, s.rows, s.cols,
                                  RandomVector(s.rows * s.cols, rng));
    const std::vector<float> x = RandomVector(s.cols, rng);
    for (GgmlBuild build : kBuilds) {
      const ComputeBackend backend({.ggml_build = build});
      const bool served =
          build == GgmlBuild::kAvx2 ? s.avx2_gemm : s.avx512_gemm;
      const bool same = SameBits(MatMul(backend, w, x, {DotOrder::kGemm}),
                                 MatMul(backend, w, x, {DotOrder::kGemv}));
      // Served, the orders differ on some of the 64 rows.
      EXPECT_EQ(same, !served) << "rows " << s.rows << " cols " << s.cols
                               << " build " << static_cast<int>(build);
    }
  }
}

// Flash attention's q . k (DotF16) is one F16 row's kGemv in either build.
TEST(GgmlMatMulTest, DotF16IsOneRowsKGemv) {
  std::mt19937 rng(29);
  for (int64_t n : {40, 64, 128, 200}) {
    const Weights k = MakeWeights(GgmlType::kF16, 1, n, RandomVector(n, rng));
    std::vector<float> q = RandomVector(n, rng);
    for (float& v : q) v = HalfToFloat(FloatToHalf(v));
    for (GgmlBuild build : kBuilds) {
      for (kernels::Isa isa : kernels::SupportedIsas()) {
        const ComputeBackend backend({.isa = isa, .ggml_build = build});
        const std::vector<float> y = MatMul(backend, k, q, {DotOrder::kGemv});
        EXPECT_EQ(std::bit_cast<uint32_t>(
                      backend.DotF16(k.bytes.data(), q.data(), n)),
                  std::bit_cast<uint32_t>(y[0]))
            << "n " << n << " build " << static_cast<int>(build) << " isa "
            << kernels::IsaName(isa);
      }
    }
  }
}

}  // namespace
}  // namespace kvault
