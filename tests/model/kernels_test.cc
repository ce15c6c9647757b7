#include "model/kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/ggml_types.h"
#include "model/kernels/compute_pool.h"
#include "model/kernels/kernel_table.h"
#include "model/kernels/quant_scalar.h"
#include "model/quantize.h"

namespace kvault::kernels {
namespace {

constexpr GgmlType kAllTypes[] = {GgmlType::kF32, GgmlType::kF16,
                                  GgmlType::kBF16, GgmlType::kQ8_0,
                                  GgmlType::kQ4_0};

bool IsQuantized(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;
}

// A random weight matrix in `type`'s layout plus its dequantized values.
struct TestMatrix {
  std::vector<std::byte> bytes;  // [rows, row_bytes]
  std::vector<float> values;     // [rows, cols] what the bytes decode to
  MatrixView view;
};

TestMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols,
                      std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TestMatrix m;
  const size_t row_bytes = GgmlRowBytes(type, cols).value();
  m.bytes.resize(row_bytes * rows);
  m.values.resize(rows * cols);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    std::span<std::byte> dst(m.bytes.data() + r * row_bytes, row_bytes);
    EXPECT_TRUE(QuantizeRow(type, row, dst).ok());
    EXPECT_TRUE(DequantizeRow(type, dst,
                              std::span<float>(m.values.data() + r * cols,
                                               static_cast<size_t>(cols)))
                    .ok());
  }
  m.view = {type, rows, cols, m.bytes.data(), row_bytes};
  return m;
}

std::vector<float> RandomVector(int64_t n, std::mt19937& rng,
                                float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The activations a quantized MatMul really multiplies with.
std::vector<float> EffectiveActivations(GgmlType type,
                                        const std::vector<float>& x) {
  if (type == GgmlType::kBF16) {  // rounded to bf16, as ggml does
    std::vector<std::byte> b(2 * x.size());
    std::vector<float> back(x.size());
    EXPECT_TRUE(QuantizeRow(GgmlType::kBF16, x, b).ok());
    EXPECT_TRUE(DequantizeRow(GgmlType::kBF16, b, back).ok());
    return back;
  }
  if (!IsQuantized(type)) return x;
  std::vector<std::byte> q(x.size() / 32 * kQ8_0BlockBytes);
  QuantizeRowQ8_0Act(x.data(), static_cast<int64_t>(x.size()), q.data());
  std::vector<float> back(x.size());
  DequantizeRowQ8_0(q, back);
  return back;
}

std::vector<float> RunMatMul(const Kernels& kernels, const MatrixView& w,
                             const std::vector<float>& x, int64_t num_tokens,
                             ComputePool* pool = nullptr) {
  std::vector<float> y(num_tokens * w.rows, std::nanf(""));
  kernels.MatMul(w, x.data(), num_tokens, y.data(), pool);
  return y;
}

TEST(KernelsTest, IsaListAndNames) {
  const std::vector<Isa> isas = SupportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_EQ(BestIsa(), isas.back());
  EXPECT_EQ(IsaFromName("neon-on-x86-no-such-isa"), std::nullopt);
  for (Isa isa :
       {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot}) {
    EXPECT_EQ(IsaFromName(IsaName(isa)), isa);
  }
  for (Isa isa : isas) EXPECT_EQ(Kernels(isa).isa(), isa);
}

// The entries a kernel set runs with a lower set's code, by design: the
// documented fallbacks (kernel_table.h). Everything else must be the set's
// own code, so a table that silently loses an entry fails here.
struct Fallback {
  Isa isa;
  const char* entry;
  Isa source;
};
constexpr Fallback kFallbacks[] = {
    // The Q8_1 activation quantizer is scalar on AVX2.
    {Isa::kAvx2, "quantize_q8_1", Isa::kScalar},
    // AVX-512 has its own MatMul kernels and Q8_K quantizer; the vector
    // kernels and the other kinds are AVX2's.
    {Isa::kAvx512, "q4_1", Isa::kAvx2},
    {Isa::kAvx512, "q5_0", Isa::kAvx2},
    {Isa::kAvx512, "q5_1", Isa::kAvx2},
    {Isa::kAvx512, "iq4_nl", Isa::kAvx2},
    {Isa::kAvx512, "rms_norm", Isa::kAvx2},
    {Isa::kAvx512, "softmax", Isa::kAvx2},
    {Isa::kAvx512, "silu_mul", Isa::kAvx2},
    {Isa::kAvx512, "dot_f32", Isa::kAvx2},
    {Isa::kAvx512, "axpy", Isa::kAvx2},
    {Isa::kAvx512, "dot_f16_f32", Isa::kAvx2},
    {Isa::kAvx512, "axpy_f16", Isa::kAvx2},
    {Isa::kAvx512, "quantize_q8_0", Isa::kAvx2},
    {Isa::kAvx512, "quantize_q8_1", Isa::kScalar},
    {Isa::kAvx512, "exp", Isa::kAvx2},
    // ggml_vec_dot's one-row kGemv is the AVX2 form in both orders.
    {Isa::kAvx512, "ggml_gemv", Isa::kAvx2},
    // ggml_compat's forms reproduce x86 builds' orders; on aarch64 the
    // portable forms give those bits.
    {Isa::kNeon, "ggml_gemv", Isa::kScalar},
    {Isa::kNeon, "ggml_gemv2", Isa::kScalar},
    {Isa::kNeon, "ggml_gemm_rows", Isa::kScalar},
    {Isa::kNeon, "ggml_swiglu", Isa::kScalar},
    {Isa::kNeonDot, "ggml_gemv", Isa::kScalar},
    {Isa::kNeonDot, "ggml_gemv2", Isa::kScalar},
    {Isa::kNeonDot, "ggml_gemm_rows", Isa::kScalar},
    {Isa::kNeonDot, "ggml_swiglu", Isa::kScalar},
    // aarch64 never picks the kGroups16 layouts (PrefersGroups16), whose
    // kernels stay scalar there; NEON-dotprod has its own integer dot
    // products, and its float, vector and quantizer kernels are NEON's.
    {Isa::kNeon, "q4_k/groups16", Isa::kScalar},
    {Isa::kNeon, "q4_0/groups16", Isa::kScalar},
    {Isa::kNeonDot, "q4_k/groups16", Isa::kScalar},
    {Isa::kNeonDot, "q4_0/groups16", Isa::kScalar},
    {Isa::kNeonDot, "f32", Isa::kNeon},
    {Isa::kNeonDot, "f16", Isa::kNeon},
    {Isa::kNeonDot, "bf16", Isa::kNeon},
    {Isa::kNeonDot, "rms_norm", Isa::kNeon},
    {Isa::kNeonDot, "softmax", Isa::kNeon},
    {Isa::kNeonDot, "silu_mul", Isa::kNeon},
    {Isa::kNeonDot, "dot_f32", Isa::kNeon},
    {Isa::kNeonDot, "axpy", Isa::kNeon},
    {Isa::kNeonDot, "dot_f16_f32", Isa::kNeon},
    {Isa::kNeonDot, "axpy_f16", Isa::kNeon},
    {Isa::kNeonDot, "quantize_q8_0", Isa::kNeon},
    {Isa::kNeonDot, "quantize_q8_1", Isa::kNeon},
    {Isa::kNeonDot, "quantize_q8_k", Isa::kNeon},
    {Isa::kNeonDot, "exp", Isa::kNeon},
};

std::optional<Isa> FallbackSource(Isa isa, std::string_view entry) {
  for (const Fallback& f : kFallbacks) {
    if (f.isa == isa && entry == f.entry) return f.source;
  }
  return std::nullopt;
}

// One dispatch: every entry a set reaches is that set's own code or its
// documented fallback.
TEST(KernelsTest, EveryEntryIsTheSetsOwnOrItsDocumentedFallback) {
  for (Isa isa : SupportedIsas()) {
    const std::vector<KernelEntry> entries = KernelEntries(isa);
    EXPECT_EQ(entries.size(), size_t{kNumWeightKinds} + 15);
    int num_own = 0;
    for (const KernelEntry& e : entries) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + e.name);
      const std::optional<Isa> fallback = FallbackSource(isa, e.name);
      EXPECT_EQ(e.source, fallback.value_or(isa));
      num_own += e.source == isa;
    }
    std::cout << IsaName(isa) << ": " << num_own << " of " << entries.size()
              << " entries its own\n";
  }
}

// The scalar reference against a double-precision product of what the
// weights and (quantized) activations decode to: checks block layouts.
TEST(KernelsTest, ScalarMatMulMatchesDequantizedProduct) {
  const Kernels scalar(Isa::kScalar);
  for (GgmlType type : kAllTypes) {
    const uint32_t seed = 1234 + static_cast<uint32_t>(type);
    SCOPED_TRACE("type " + std::string(GgmlTypeName(type)) + " seed " +
                 std::to_string(seed));
    std::mt19937 rng(seed);
    const int64_t rows = 5, cols = 96, num_tokens = 3;
    TestMatrix m = MakeMatrix(type, rows, cols, rng);
    const std::vector<float> x = RandomVector(num_tokens * cols, rng);
    const std::vector<float> y = RunMatMul(scalar, m.view, x, num_tokens);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const std::vector<float> xt = EffectiveActivations(
          type,
          std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          want += static_cast<double>(m.values[r * cols + c]) * xt[c];
          mag += std::fabs(static_cast<double>(m.values[r * cols + c]) * xt[c]);
        }
        EXPECT_NEAR(y[t * rows + r], want, 1e-6 * mag + 1e-7)
            << "t=" << t << " r=" << r;
      }
    }
  }
}

// Every SIMD MatMul against the scalar reference, odd shapes included.
TEST(KernelsTest, SimdMatMulMatchesScalar) {
  const int64_t kCols[] = {32, 64, 96, 4096 + 32};
  const int64_t kRows[] = {1, 3, 4, 5, 17, 67};
  const Kernels scalar(Isa::kScalar);
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar) continue;
    const Kernels simd(isa);
    for (GgmlType type : kAllTypes) {
      for (int64_t cols : kCols) {
        for (int64_t rows : kRows) {
          const uint32_t seed = static_cast<uint32_t>(cols * 131 + rows);
          SCOPED_TRACE(std::string(IsaName(isa)) + " " +
                       std::string(GgmlTypeName(type)) + " rows " +
                       std::to_string(rows) + " cols " + std::to_string(cols) +
                       " seed " + std::to_string(seed));
          std::mt19937 rng(seed);
          TestMatrix m = MakeMatrix(type, rows, cols, rng);
          const int64_t num_tokens = 1 + rows % 9;
          const std::vector<float> x = RandomVector(num_tokens * cols, rng);
          const std::vector<float> want =
              RunMatMul(scalar, m.view, x, num_tokens);
          const std::vector<float> got = RunMatMul(simd, m.view, x, num_tokens);
          for (size_t i = 0; i < got.size(); ++i) {
            // Per-element error bound: relative to sum |w| |x| (~cols / 4).
            const float tol = 2e-6f * static_cast<float>(cols);
            ASSERT_NEAR(got[i], want[i], tol) << "index " << i;
          }
        }
      }
    }
  }
}

// Float types need no block multiple: columns not a multiple of 8 / 16
// exercise the SIMD tails.
TEST(KernelsTest, SimdFloatMatMulOddColumns) {
  const Kernels scalar(Isa::kScalar);
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar) continue;
    const Kernels simd(isa);
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
      for (int64_t cols : {1, 7, 9, 17, 33, 100}) {
        const uint32_t seed = static_cast<uint32_t>(cols);
        SCOPED_TRACE(std::string(IsaName(isa)) + " " +
                     std::string(GgmlTypeName(type)) + " cols " +
                     std::to_string(cols) + " seed " + std::to_string(seed));
        std::mt19937 rng(seed);
        TestMatrix m = MakeMatrix(type, 6, cols, rng);
        const std::vector<float> x = RandomVector(5 * cols, rng);
        const std::vector<float> want = RunMatMul(scalar, m.view, x, 5);
        const std::vector<float> got = RunMatMul(simd, m.view, x, 5);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-5f * static_cast<float>(cols) + 1e-6f)
              << "index " << i;
        }
      }
    }
  }
}

// The determinism contract: y[t, r] is bit-identical whether token t is
// alone or in a batch of any size, and for any thread count.
TEST(KernelsTest, MatMulIsBatchAndThreadInvariant) {
  ComputePool pool1(1);
  ComputePool pool3(3);
  for (Isa isa : SupportedIsas()) {
    const Kernels k(isa);
    for (GgmlType type : kAllTypes) {
      const uint32_t seed = 99 + static_cast<uint32_t>(type);
      SCOPED_TRACE(std::string(IsaName(isa)) + " " +
                   std::string(GgmlTypeName(type)) + " seed " +
                   std::to_string(seed));
      std::mt19937 rng(seed);
      // 4128 f32 columns make the token chunk 15 rows: 37 tokens cross it.
      const int64_t rows = 67, cols = 4096 + 32, num_tokens = 37;
      TestMatrix m = MakeMatrix(type, rows, cols, rng);
      const std::vector<float> x = RandomVector(num_tokens * cols, rng, 3.0f);
      const std::vector<float> batch = RunMatMul(k, m.view, x, num_tokens);
      EXPECT_EQ(RunMatMul(k, m.view, x, num_tokens, &pool1), batch);
      EXPECT_EQ(RunMatMul(k, m.view, x, num_tokens, &pool3), batch);
      for (int64_t t = 0; t < num_tokens; ++t) {
        const std::vector<float> xt(x.begin() + t * cols,
                                    x.begin() + (t + 1) * cols);
        const std::vector<float> alone =
            RunMatMul(k, m.view, xt, 1, t % 2 == 0 ? &pool3 : nullptr);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * rows,
                                 rows * sizeof(float)))
            << "token " << t;
      }
      // A prefix batch (different tiling of the tail) agrees too.
      const std::vector<float> prefix = RunMatMul(k, m.view, x, 6, &pool1);
      ASSERT_EQ(0, std::memcmp(prefix.data(), batch.data(),
                               prefix.size() * sizeof(float)));
    }
  }
}

// Rows may sit further apart than their packed size (a view into a larger
// tensor); every ISA must honour row_bytes.
TEST(KernelsTest, MatMulHonoursRowStride) {
  for (Isa isa : SupportedIsas()) {
    const Kernels k(isa);
    for (GgmlType type : kAllTypes) {
      const uint32_t seed = 7 + static_cast<uint32_t>(type);
      SCOPED_TRACE(std::string(IsaName(isa)) + " " +
                   std::string(GgmlTypeName(type)) + " seed " +
                   std::to_string(seed));
      std::mt19937 rng(seed);
      const int64_t rows = 9, cols = 64, num_tokens = 5;
      TestMatrix m = MakeMatrix(type, rows, cols, rng);
      const size_t padded = m.view.row_bytes + 40;
      std::vector<std::byte> spaced(padded * rows, std::byte{0x7F});
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(spaced.data() + r * padded,
                    m.bytes.data() + r * m.view.row_bytes, m.view.row_bytes);
      }
      MatrixView view = m.view;
      view.data = spaced.data();
      view.row_bytes = padded;
      const std::vector<float> x = RandomVector(num_tokens * cols, rng);
      EXPECT_EQ(RunMatMul(k, view, x, num_tokens),
                RunMatMul(k, m.view, x, num_tokens));
    }
  }
}

TEST(KernelsTest, MatMulEmptyIsNoOp) {
  std::mt19937 rng(5);
  TestMatrix m = MakeMatrix(GgmlType::kF32, 3, 32, rng);
  std::vector<float> y = {42.0f};
  Kernels(BestIsa()).MatMul(m.view, nullptr, 0, y.data(), nullptr);
  EXPECT_EQ(y[0], 42.0f);
}

}  // namespace
}  // namespace kvault::kernels
