// The quantized block types beyond Q8_0/Q4_0, checked on the real blocks
// llama-quantize wrote (../shared/models/kquant): dequantization against
// the F32 original, each scalar dot product against the dequantized
// product, the SIMD kernels against the scalar ones, and the activation
// quantizers' defining properties.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/float16.h"
#include "model/gguf_file.h"
#include "model/kernels/kernels.h"
#include "model/kernels/quant_blocks.h"
#include "model/kernels/quant_scalar.h"
#include "model/quantize.h"

namespace kvault::kernels {
namespace {

const std::string kDir =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models/kquant/";

struct FileCase {
  std::string stem;     // st260K-x4.STEM.gguf
  double max_rel_rmse;  // dequantized vs F32, over a whole tensor
};

// Bounds ~1.5x the relative RMSE measured on ffn_up of each file.
const FileCase kFiles[] = {
    {"q8_0", 0.01},   {"q6_k", 0.02},   {"q5_k_m", 0.05}, {"q4_k_m", 0.1},
    {"q4_k_s", 0.1},  {"q3_k_m", 0.25}, {"q2_k", 0.45},   {"q4_0", 0.15},
    {"q4_1", 0.12},   {"q5_0", 0.07},   {"q5_1", 0.06},   {"iq4_nl", 0.12},
    {"iq4_xs", 0.12},
};

std::unique_ptr<GgufFile> OpenOrNull(const std::string& stem) {
  auto file = GgufFile::Open(kDir + "st260K-x4." + stem + ".gguf");
  return file.ok() ? std::move(*file) : nullptr;
}

std::vector<float> Dequantized(const GgufFile& file, const GgufTensorInfo& t) {
  std::vector<float> out(t.num_elements);
  const Status s = DequantizeRow(t.type, file.TensorData(t), out);
  EXPECT_TRUE(s.ok()) << t.name << ": " << s.ToString();
  return out;
}

TEST(QuantKernelsTest, DequantizedTensorsMatchTheF32Original) {
  auto f32 = OpenOrNull("f32");
  if (f32 == nullptr) GTEST_SKIP() << "no " << kDir;
  for (const FileCase& c : kFiles) {
    auto file = OpenOrNull(c.stem);
    ASSERT_NE(file, nullptr) << c.stem;
    for (const GgufTensorInfo& t : file->tensors()) {
      if (t.shape.size() != 2) continue;
      SCOPED_TRACE(c.stem + " " + t.name + " " +
                   std::string(GgmlTypeName(t.type)));
      const std::vector<float> got = Dequantized(*file, t);
      const std::vector<float> want =
          Dequantized(*f32, *f32->FindTensor(t.name));
      ASSERT_EQ(got.size(), want.size());
      double err = 0, norm = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        err += (got[i] - want[i]) * double{got[i] - want[i]};
        norm += want[i] * double{want[i]};
      }
      EXPECT_LE(std::sqrt(err / norm), c.max_rel_rmse);
    }
  }
}

// The activation row a kernel multiplies with, dequantized.
std::vector<float> QuantizedActivation(GgmlType weight, const float* x,
                                       int64_t n) {
  std::vector<float> out(n);
  if (weight == GgmlType::kQ4_1 || weight == GgmlType::kQ5_1) {
    std::vector<std::byte> q(n / 32 * q8_1::kBytes);
    QuantizeRowQ8_1(x, n, q.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::byte* b = q.data() + i / 32 * q8_1::kBytes;
      uint16_t d;
      std::memcpy(&d, b, 2);
      out[i] = HalfToFloat(d) * static_cast<int8_t>(b[q8_1::kQs + i % 32]);
    }
  } else if (GetGgmlTypeInfo(weight).block_size == 256) {
    std::vector<std::byte> q(n / 256 * q8_k::kBytes);
    QuantizeRowQ8_K(x, n, q.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::byte* b = q.data() + i / 256 * q8_k::kBytes;
      float d;
      std::memcpy(&d, b, 4);
      out[i] = d * static_cast<int8_t>(b[q8_k::kQs + i % 256]);
    }
  } else {
    std::vector<std::byte> q(n / 32 * kQ8_0BlockBytes);
    QuantizeRowQ8_0Act(x, n, q.data());
    DequantizeRowQ8_0(q, out);
  }
  return out;
}

MatrixView ViewOf(const GgufFile& file, const GgufTensorInfo& t) {
  return {t.type, static_cast<int64_t>(t.shape[1]),
          static_cast<int64_t>(t.shape[0]), file.TensorData(t).data(),
          t.size_bytes / t.shape[1]};
}

TEST(QuantKernelsTest, ScalarMatMulIsTheDequantizedProduct) {
  for (const FileCase& c : kFiles) {
    auto file = OpenOrNull(c.stem);
    if (file == nullptr) GTEST_SKIP() << "no " << kDir;
    for (const GgufTensorInfo& t : file->tensors()) {
      if (t.shape.size() != 2 || t.name.rfind("blk.0.", 0) != 0) continue;
      SCOPED_TRACE(c.stem + " " + t.name);
      const MatrixView w = ViewOf(*file, t);
      const std::vector<float> wf = Dequantized(*file, t);
      std::mt19937 rng(static_cast<uint32_t>(w.cols + w.rows));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      const int64_t num_tokens = 3;
      std::vector<float> x(num_tokens * w.cols);
      for (float& v : x) v = dist(rng);
      std::vector<float> y(num_tokens * w.rows);
      Kernels(Isa::kScalar).MatMul(w, x.data(), num_tokens, y.data(), nullptr);
      // Q8_1's s = d * sum(q) is stored as f16: the min term carries its
      // rounding (2^-11 relative).
      const bool q8_1 = t.type == GgmlType::kQ4_1 || t.type == GgmlType::kQ5_1;
      const double rel = q8_1 ? 1e-3 : 1e-5;
      for (int64_t tk = 0; tk < num_tokens; ++tk) {
        const std::vector<float> xq =
            QuantizedActivation(t.type, &x[tk * w.cols], w.cols);
        for (int64_t r = 0; r < w.rows; ++r) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < w.cols; ++i) {
            want += double{wf[r * w.cols + i]} * xq[i];
            mag += std::fabs(double{wf[r * w.cols + i]} * xq[i]);
          }
          ASSERT_NEAR(y[tk * w.rows + r], want, rel * mag + 1e-6)
              << "token " << tk << " row " << r;
        }
      }
    }
  }
}

TEST(QuantKernelsTest, SimdMatMulMatchesScalarOnRealBlocks) {
  for (const FileCase& c : kFiles) {
    auto file = OpenOrNull(c.stem);
    if (file == nullptr) GTEST_SKIP() << "no " << kDir;
    for (const GgufTensorInfo& t : file->tensors()) {
      if (t.shape.size() != 2 || t.name.rfind("blk.1.", 0) != 0) continue;
      const MatrixView w = ViewOf(*file, t);
      std::mt19937 rng(7);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (int64_t num_tokens : {1, 5, 13}) {
        std::vector<float> x(num_tokens * w.cols);
        for (float& v : x) v = dist(rng);
        std::vector<float> want(num_tokens * w.rows), got(want.size());
        // Both orders, mixed in one call.
        std::vector<DotOrder> orders(num_tokens, DotOrder::kGemm);
        for (int64_t t = 1; t < num_tokens; t += 3) orders[t] = DotOrder::kGemv;
        Kernels(Isa::kScalar)
            .MatMul(w, x.data(), num_tokens, want.data(), nullptr, orders);
        for (Isa isa : SupportedIsas()) {
          SCOPED_TRACE(c.stem + " " + t.name + " " + std::string(IsaName(isa)) +
                       " tokens " + std::to_string(num_tokens));
          Kernels(isa).MatMul(w, x.data(), num_tokens, got.data(), nullptr,
                              orders);
          for (size_t i = 0; i < got.size(); ++i) {
            // Every kernel sums in llama.cpp's order, as the scalar one
            // does: the same bits.
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]),
                      std::bit_cast<uint32_t>(want[i]))
                << "index " << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

// The row-lane kernels (8 or 16 rows in the lanes of one register) on
// row counts that leave a partial group, on rows further apart than their
// size, and on batches that cross their token tiles and chunks: bit for
// bit the scalar result, both orders mixed.
TEST(QuantKernelsTest, RowLaneKernelsMatchScalarOnPartialGroups) {
  for (auto [stem, type] : {std::pair{"q4_k_m", GgmlType::kQ4_K},
                            std::pair{"q6_k", GgmlType::kQ6_K},
                            std::pair{"q5_k_m", GgmlType::kQ5_K},
                            std::pair{"q3_k_m", GgmlType::kQ3_K},
                            std::pair{"q2_k", GgmlType::kQ2_K},
                            std::pair{"iq4_xs", GgmlType::kIQ4_XS},
                            std::pair{"iq4_nl", GgmlType::kIQ4_NL}}) {
    auto file = OpenOrNull(stem);
    if (file == nullptr) GTEST_SKIP() << "no " << kDir;
    const GgufTensorInfo* t = nullptr;  // the first with 32 * 3 rows
    for (const GgufTensorInfo& info : file->tensors()) {
      if (info.type == type && info.shape.size() == 2 && info.shape[1] >= 96 &&
          t == nullptr) {
        t = &info;
      }
    }
    ASSERT_NE(t, nullptr) << stem;
    const MatrixView full = ViewOf(*file, *t);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    // 261 tokens cross the kernels' token chunks (256 at most).
    for (auto [rows, num_tokens] : {std::pair<int64_t, int64_t>{1, 261},
                                    {7, 1},
                                    {13, 6},
                                    {29, 37},
                                    {32, 5}}) {
      for (int64_t stride : {1, 3}) {  // every row, every third row
        MatrixView w = full;
        w.rows = rows;
        w.row_bytes = full.row_bytes * stride;
        std::vector<float> x(num_tokens * w.cols);
        for (float& v : x) v = dist(rng);
        std::vector<DotOrder> orders(num_tokens, DotOrder::kGemm);
        for (int64_t i = 0; i < num_tokens; i += 3) orders[i] = DotOrder::kGemv;
        std::vector<float> want(num_tokens * rows), got(want.size());
        Kernels(Isa::kScalar)
            .MatMul(w, x.data(), num_tokens, want.data(), nullptr, orders);
        for (Isa isa : SupportedIsas()) {
          SCOPED_TRACE(std::string(stem) + " " + std::string(IsaName(isa)) +
                       " rows " + std::to_string(rows) + " stride " +
                       std::to_string(stride));
          Kernels(isa).MatMul(w, x.data(), num_tokens, got.data(), nullptr,
                              orders);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(),
                                   want.size() * sizeof(float)));
        }
      }
    }
  }
}

// WeightLayout::kGroups16 holds the same matrix: every kernel set gives
// the kRows result bit for bit, in both orders.
TEST(QuantKernelsTest, Groups16LayoutGivesTheSameProducts) {
  for (auto [stem, type] : {std::pair{"q4_k_m", GgmlType::kQ4_K},
                            std::pair{"q4_0", GgmlType::kQ4_0}}) {
    auto file = OpenOrNull(stem);
    if (file == nullptr) GTEST_SKIP() << "no " << kDir;
    int num_checked = 0;
    for (const GgufTensorInfo& t : file->tensors()) {
      if (t.type != type || t.shape.size() != 2) continue;
      const MatrixView rows = ViewOf(*file, t);
      std::vector<std::byte> bytes(file->TensorData(t).begin(),
                                   file->TensorData(t).end());
      MatrixView groups = rows;
      groups.data = bytes.data();
      RewriteAsGroups16(bytes, &groups);
      ASSERT_EQ(groups.layout, WeightLayout::kGroups16);
      ASSERT_NE(0, std::memcmp(bytes.data(), rows.data, bytes.size()));
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (int64_t num_tokens : {1, 6}) {
        std::vector<float> x(num_tokens * rows.cols);
        for (float& v : x) v = dist(rng);
        std::vector<DotOrder> orders(num_tokens, DotOrder::kGemm);
        orders.back() = DotOrder::kGemv;
        std::vector<float> want(num_tokens * rows.rows), got(want.size());
        for (Isa isa : SupportedIsas()) {
          SCOPED_TRACE(t.name + " " + std::string(IsaName(isa)) + " tokens " +
                       std::to_string(num_tokens));
          const Kernels k(isa);
          k.MatMul(rows, x.data(), num_tokens, want.data(), nullptr, orders);
          k.MatMul(groups, x.data(), num_tokens, got.data(), nullptr, orders);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(),
                                   want.size() * sizeof(float)));
        }
      }
      ++num_checked;
    }
    EXPECT_GT(num_checked, 0) << stem;
  }
}

// llama.cpp's repacked Q4_K/Q2_K GEMM steps every 64/128 values, its GEMV
// every 256: on real rows the two orders must give different last bits
// somewhere (even within one super-block), and agree to rounding.
TEST(QuantKernelsTest, Q4KAndQ2KOrdersDiffer) {
  for (auto [stem, type] : {std::pair{"q4_k_m", GgmlType::kQ4_K},
                            std::pair{"q2_k", GgmlType::kQ2_K}}) {
    auto file = OpenOrNull(stem);
    if (file == nullptr) GTEST_SKIP() << "no " << kDir;
    // The block-diagonal layers of st260K-x4 leave 3 of 4 chunks of a row
    // zero; the token embedding is dense.
    const GgufTensorInfo* t = file->FindTensor("token_embd.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, type) << stem;
    const MatrixView w = ViewOf(*file, *t);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(w.cols);
    for (float& v : x) v = dist(rng);
    std::vector<float> gemv(w.rows), gemm(w.rows);
    const DotOrder kGemm[] = {DotOrder::kGemm};
    const Kernels best(BestIsa());
    best.MatMul(w, x.data(), 1, gemv.data(), nullptr);
    best.MatMul(w, x.data(), 1, gemm.data(), nullptr, kGemm);
    int num_different = 0;
    for (int64_t r = 0; r < w.rows; ++r) {
      num_different += gemv[r] != gemm[r];
      EXPECT_NEAR(gemv[r], gemm[r], 1e-5f * (1 + std::fabs(gemv[r])));
    }
    EXPECT_GT(num_different, 0) << stem;
  }
}

// Every kernel set's Q8_K quantizer writes the scalar reference's bytes,
// including ties of +max and -max, halfway values, zeros and NaN.
TEST(QuantKernelsTest, Q8KQuantizersAgreeWithTheScalarOne) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(6 * kBlockK);
  for (float& v : x) v = dist(rng);
  x[kBlockK + 5] = -9.0f;  // block 1: -max first, then +max
  x[kBlockK + 9] = 9.0f;
  for (int i = 0; i < kBlockK; ++i) x[2 * kBlockK + i] = 0.5f * (i % 9 - 4);
  x[2 * kBlockK + 7] = 127.0f / 0.5f;  // iscale 0.5: exact .5 halves
  std::fill(x.begin() + 3 * kBlockK, x.begin() + 4 * kBlockK, 0.0f);
  x[4 * kBlockK + 3] = std::nanf("");
  x[5 * kBlockK + 200] = -1e30f;
  std::vector<std::byte> want(6 * q8_k::kBytes), got(want.size());
  QuantizeRowQ8_K(x.data(), x.size(), want.data());
  for (Isa isa : SupportedIsas()) {
    Kernels(isa).QuantizeQ8_K(x.data(), x.size(), got.data());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size()))
        << IsaName(isa);
  }
}

TEST(QuantKernelsTest, Q8KQuantizerKeepsScaleSignAndSums) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(512);
  for (float& v : x) v = dist(rng);
  x[17] = -5.0f;  // block 0's largest magnitude is negative
  x[300] = 4.0f;  // block 1's is positive
  std::vector<std::byte> q(2 * q8_k::kBytes);
  QuantizeRowQ8_K(x.data(), 512, q.data());
  for (int b = 0; b < 2; ++b) {
    const std::byte* blk = q.data() + b * q8_k::kBytes;
    float d;
    std::memcpy(&d, blk, 4);
    const auto* qs = reinterpret_cast<const int8_t*>(blk + q8_k::kQs);
    // d = max / -127: the largest value maps to -127 whatever its sign.
    EXPECT_EQ(qs[b == 0 ? 17 : 300 - 256], -127);
    EXPECT_FLOAT_EQ(d, b == 0 ? 5.0f / 127.0f : -4.0f / 127.0f);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qs[16 * g + i];
      int16_t bsum;
      std::memcpy(&bsum, blk + q8_k::kBsums + 2 * g, 2);
      EXPECT_EQ(bsum, sum) << "group " << g;
    }
    for (int i = 0; i < 256; ++i) {
      EXPECT_NEAR(d * qs[i], x[256 * b + i], std::fabs(d) / 2 + 1e-7f);
    }
  }
  std::vector<float> zeros(256, 0.0f);
  std::vector<std::byte> qz(q8_k::kBytes, std::byte{0x5A});
  QuantizeRowQ8_K(zeros.data(), 256, qz.data());
  for (std::byte v : qz) EXPECT_EQ(v, std::byte{0});
}

TEST(QuantKernelsTest, Q8_1CarriesTheScaledSum) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(64);
  for (float& v : x) v = dist(rng);
  std::vector<std::byte> q(2 * q8_1::kBytes);
  QuantizeRowQ8_1(x.data(), 64, q.data());
  for (int b = 0; b < 2; ++b) {
    const std::byte* blk = q.data() + b * q8_1::kBytes;
    uint16_t dh, sh;
    std::memcpy(&dh, blk + q8_1::kD, 2);
    std::memcpy(&sh, blk + q8_1::kS, 2);
    int sum = 0, max_abs = 0;
    for (int i = 0; i < 32; ++i) {
      const int v = static_cast<int8_t>(blk[q8_1::kQs + i]);
      sum += v;
      max_abs = std::max(max_abs, std::abs(v));
    }
    EXPECT_EQ(max_abs, 127);
    // s = f16(d * sum(q)), d = amax / 127.
    EXPECT_NEAR(HalfToFloat(sh), HalfToFloat(dh) * sum,
                std::fabs(HalfToFloat(dh) * sum) * 1e-3 + 1e-6);
  }
}

}  // namespace
}  // namespace kvault::kernels
