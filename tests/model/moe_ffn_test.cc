// The mixture-of-experts FFN: loading Mixtral-style files (the 3-D expert
// tensors sliced per expert, the precise refusals), the router's
// arithmetic against a double-precision reference, and the grouped expert
// pass against each token run alone. The numerics against llama.cpp are
// checked by arch_golden_test (mixtral, qwen3moe).
#include "model/moe_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/llama_hparams.h"
#include "model_edit.h"

namespace kvault {
namespace {

using ggml_compat::GgmlBuild;

constexpr uint32_t kExperts = 4;
constexpr uint32_t kUsed = 2;

std::shared_ptr<const std::string> MoeImage(GgmlType type = GgmlType::kF32) {
  return GenImage(type, kExperts, kUsed);
}

void ExpectError(const StatusOr<std::unique_ptr<LlamaModel>>& model,
                 StatusCode code, const std::string& text) {
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), code) << model.status().ToString();
  EXPECT_NE(model.status().ToString().find(text), std::string::npos)
      << model.status().ToString();
}

// An edit adding metadata entry {key, value}.
Edit AddKey(const std::string& key, GgufValue value) {
  return [key, value](auto* metadata, auto*, auto*) {
    metadata->push_back({key, value});
  };
}

TEST(MoeLoadTest, ExpertsAreSlicesOfTheThreeDimensionalTensors) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    auto model = FromImage(MoeImage(type));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const LlamaHparams& h = (*model)->hparams();
    EXPECT_EQ(h.n_expert, kExperts);
    EXPECT_EQ(h.n_expert_used, kUsed);
    EXPECT_EQ(h.n_ff_exp, 96u);  // llama: feed_forward_length
    const GgufFile& file = (*model)->file();
    for (uint32_t l = 0; l < 2; ++l) {
      const LayerWeights& w = (*model)->weights().layers[l];
      const std::string p = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(w.gate_inp.type, GgmlType::kF32);  // never quantized
      EXPECT_EQ(w.gate_inp.rows, kExperts);
      EXPECT_EQ(w.w_gate.data, nullptr);
      ASSERT_EQ(w.experts.size(), kExperts);
      const auto* down = file.FindTensor(p + "ffn_down_exps.weight");
      ASSERT_NE(down, nullptr);
      const size_t expert_bytes = down->size_bytes / kExperts;
      for (uint32_t e = 0; e < kExperts; ++e) {
        const ExpertWeights& x = w.experts[e];
        EXPECT_EQ(x.down.type, type);
        EXPECT_EQ(x.down.rows, 64);
        EXPECT_EQ(x.down.cols, 96);
        EXPECT_EQ(x.gate.rows, 96);
        EXPECT_EQ(x.up.cols, 64);
        EXPECT_EQ(x.down.data,
                  file.TensorData(*down).data() + e * expert_bytes);
      }
    }
  }
}

// A decode step reads the n_expert_used experts of each layer, not all.
TEST(MoeLoadTest, DecodeBytesCountTheUsedExperts) {
  auto model = FromImage(MoeImage());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  uint64_t experts = 0, embedding = 0;
  for (const GgufTensorInfo& t : (*model)->file().tensors()) {
    if (t.name.ends_with("_exps.weight")) experts += t.size_bytes;
    if (t.name == "token_embd.weight") embedding = t.size_bytes;
  }
  ASSERT_GT(experts, 0u);
  EXPECT_EQ((*model)->decode_bytes(), (*model)->weight_bytes() - embedding -
                                          experts + experts / kExperts * kUsed);
}

TEST(MoeLoadTest, ExpertCountsAreChecked) {
  ExpectError(EditedImage(MoeImage(),
                          [](auto* metadata, auto*, auto*) {
                            for (auto& entry : *metadata) {
                              if (entry.key == "llama.expert_used_count") {
                                entry.value = GgufValue::Uint32(5);
                              }
                            }
                          }),
              StatusCode::kInvalidArgument,
              "expert_count 4, expert_used_count 5: more experts used");
  ExpectError(EditedModel(AddKey("llama.expert_count", GgufValue::Uint32(4))),
              StatusCode::kInvalidArgument, "a mixture of experts must use");
}

TEST(MoeLoadTest, MissingOrMisshapenExpertTensorsAreNamed) {
  ExpectError(EditedImage(MoeImage(),
                          [](auto*, auto* tensors, auto* data) {
                            const size_t i =
                                IndexOf(*tensors, "blk.1.ffn_gate_inp.weight");
                            tensors->erase(tensors->begin() + i);
                            data->erase(data->begin() + i);
                          }),
              StatusCode::kNotFound,
              "tensor blk.1.ffn_gate_inp.weight is missing");
  ExpectError(EditedImage(MoeImage(),
                          [](auto*, auto* tensors, auto* data) {
                            const size_t i =
                                IndexOf(*tensors, "blk.0.ffn_up_exps.weight");
                            (*tensors)[i].shape = {64, 96, 3};
                            (*data)[i].resize(64 * 96 * 3 * sizeof(float));
                          }),
              StatusCode::kInvalidArgument,
              "tensor blk.0.ffn_up_exps.weight has shape [64, 96, 3], "
              "expected [64, 96, 4]");
}

TEST(MoeLoadTest, ExpertOptionsKvaultLacksAreRefused) {
  ExpectError(
      EditedImage(MoeImage(), AddKey("llama.expert_shared_feed_forward_length",
                                     GgufValue::Uint32(32))),
      StatusCode::kUnimplemented, "a shared expert");
  ExpectError(EditedImage(MoeImage(), AddKey("llama.expert_weights_scale",
                                             GgufValue::Float32(2.5f))),
              StatusCode::kUnimplemented, "llama.expert_weights_scale");
  auto scale_one = EditedImage(
      MoeImage(), AddKey("llama.expert_weights_scale", GgufValue::Float32(1)));
  EXPECT_TRUE(scale_one.ok()) << scale_one.status().ToString();
}

TEST(MoeLoadTest, Qwen3MoeNeedsExperts) {
  ExpectError(EditedModel(Rename("qwen3moe")), StatusCode::kInvalidArgument,
              "'qwen3moe' needs qwen3moe.expert_count > 0, got 0");
}

// Returns the hyperparameters of the MoE image renamed to qwen3moe, plus
// `extra` keys.
StatusOr<LlamaHparams> Qwen3MoeHparams(std::vector<GgufMetadataEntry> extra) {
  const Edit rename = Rename("qwen3moe");
  KV_ASSIGN_OR_RETURN(
      auto renamed,
      EditedGguf(MoeImage(), [&](auto* metadata, auto* tensors, auto* data) {
        rename(metadata, tensors, data);
        for (auto& entry : extra) metadata->push_back(entry);
      }));
  return ReadLlamaHparams(*renamed);
}

TEST(MoeLoadTest, Qwen3MoeExpertWidthDefaultsToFfPerUsedExpert) {
  auto defaulted = Qwen3MoeHparams({});
  ASSERT_TRUE(defaulted.ok()) << defaulted.status().ToString();
  EXPECT_EQ(defaulted->n_ff_exp, 96u / kUsed);
  auto given = Qwen3MoeHparams(
      {{"qwen3moe.expert_feed_forward_length", GgufValue::Uint32(32)}});
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->n_ff_exp, 32u);
}

// Returns softmax(x) computed in double.
std::vector<double> ReferenceSoftMax(const std::vector<float>& x) {
  double max = x[0], sum = 0;
  for (float v : x) max = std::max(max, double{v});
  std::vector<double> y;
  for (float v : x) y.push_back(std::exp(v - max));
  for (double v : y) sum += v;
  for (double& v : y) v /= sum;
  return y;
}

TEST(MoeRoutingTest, SoftMaxMatchesDoublePrecisionInEveryBuild) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  // 4 and 8 take the scalar tail only, 40 whole blocks of both builds.
  for (int n : {4, 8, 40, 128}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    const std::vector<double> want = ReferenceSoftMax(x);
    for (GgmlBuild build : {GgmlBuild::kAvx2, GgmlBuild::kAvx512}) {
      std::vector<float> y(n);
      GgmlSoftMax(x.data(), n, build, y.data());
      for (int i = 0; i < n; ++i) {
        // Float rounding of x - max moves e^(x - max) by up to |x - max|
        // * 2^-24 relative (~5e-7 here), the float exp by a few ulps.
        EXPECT_NEAR(y[i], want[i], 1e-6 * want[i] + 1e-12)
            << "n " << n << " i " << i;
      }
    }
  }
}

TEST(MoeRoutingTest, PicksTheMostProbableExpertsAndNormalisesTheirWeights) {
  const std::vector<float> logits = {0.1f,  2.0f,  -1.0f, 1.5f,    // token 0
                                     -3.0f, -2.0f, -2.5f, -0.5f};  // token 1
  const MoeRouting r = RouteTokens(logits, 4, 2, GgmlBuild::kAvx512);
  ASSERT_EQ(r.experts.size(), 4u);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3, 3, 1}));
  for (int t = 0; t < 2; ++t) {
    const std::vector<float> row(logits.begin() + 4 * t,
                                 logits.begin() + 4 * t + 4);
    const std::vector<double> p = ReferenceSoftMax(row);
    const double a = p[r.experts[2 * t]], b = p[r.experts[2 * t + 1]];
    EXPECT_NEAR(r.weights[2 * t], a / (a + b), 1e-6);
    EXPECT_NEAR(r.weights[2 * t + 1], b / (a + b), 1e-6);
    EXPECT_GT(r.weights[2 * t], r.weights[2 * t + 1]);
  }
}

TEST(MoeRoutingTest, TiesKeepTheLowerExpertFirst) {
  // libstdc++'s std::sort insertion-sorts short rows: stable, as ggml's
  // argsort on llama.cpp's side.
  const std::vector<float> logits = {0.5f, 0.25f, 0.5f, 0.5f, 0.5f};
  const MoeRouting r = RouteTokens(logits, 5, 3, GgmlBuild::kAvx2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(r.weights[0], r.weights[2]);
  const MoeRouting one = RouteTokens(logits, 5, 1, GgmlBuild::kAvx2);
  EXPECT_EQ(one.weights, std::vector<float>{1.0f});  // p / p
}

// Random F32 experts [n_ff, n_embd] / [n_embd, n_ff], owned by `storage`.
std::vector<ExpertWeights> RandomExperts(
    int n, int64_t n_embd, int64_t n_ff,
    std::vector<std::vector<float>>* data) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  auto matrix = [&](int64_t rows, int64_t cols) {
    data->emplace_back(rows * cols);
    for (float& v : data->back()) v = normal(rng);
    kernels::MatrixView m;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = cols * sizeof(float);
    m.data = reinterpret_cast<const std::byte*>(data->back().data());
    return m;
  };
  data->reserve(3 * n);
  std::vector<ExpertWeights> experts;
  for (int e = 0; e < n; ++e) {
    ExpertWeights w;
    w.gate = matrix(n_ff, n_embd);
    w.up = matrix(n_ff, n_embd);
    w.down = matrix(n_embd, n_ff);
    experts.push_back(w);
  }
  return experts;
}

// Token t's FFN output in double: sum_j w_j down_j(silu(gate_j x) up_j x).
std::vector<double> ReferenceToken(const std::vector<ExpertWeights>& experts,
                                   const MoeRouting& r, const float* x,
                                   size_t t, int64_t n_embd) {
  auto at = [](const kernels::MatrixView& m, int64_t i, int64_t c) {
    return double{reinterpret_cast<const float*>(m.data)[i * m.cols + c]};
  };
  std::vector<double> out(n_embd, 0.0);
  for (uint32_t j = 0; j < r.n_used; ++j) {
    const ExpertWeights& w = experts[r.experts[t * r.n_used + j]];
    std::vector<double> h(w.gate.rows);
    for (int64_t i = 0; i < w.gate.rows; ++i) {
      double g = 0, u = 0;
      for (int64_t c = 0; c < n_embd; ++c) {
        g += at(w.gate, i, c) * x[c];
        u += at(w.up, i, c) * x[c];
      }
      h[i] = g / (1 + std::exp(-g)) * u;
    }
    for (int64_t c = 0; c < n_embd; ++c) {
      double d = 0;
      for (int64_t i = 0; i < w.gate.rows; ++i) d += at(w.down, c, i) * h[i];
      out[c] += r.weights[t * r.n_used + j] * d;
    }
  }
  return out;
}

TEST(MoeExpertsTest, GroupedBatchGivesEachTokenItsOwnBits) {
  constexpr int64_t kEmbd = 64, kFf = 48;
  constexpr size_t kTokens = 7;
  std::vector<std::vector<float>> storage;
  const auto experts = RandomExperts(kExperts, kEmbd, kFf, &storage);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kTokens * kEmbd), logits(kTokens * kExperts);
  for (float& v : x) v = normal(rng);
  for (float& v : logits) v = normal(rng);
  const MoeRouting all = RouteTokens(logits, kExperts, kUsed, GgmlBuild::kAvx2);
  ComputeBackendOptions options;
  options.num_threads = 2;
  const ComputeBackend backend(options);
  std::vector<float> batched(kTokens * kEmbd);
  RunExperts(experts, all, x.data(), kTokens, kEmbd, backend, batched.data());
  for (size_t t = 0; t < kTokens; ++t) {
    const MoeRouting one =
        RouteTokens(std::span(&logits[t * kExperts], kExperts), kExperts, kUsed,
                    GgmlBuild::kAvx2);
    std::vector<float> alone(kEmbd);
    RunExperts(experts, one, &x[t * kEmbd], 1, kEmbd, backend, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), &batched[t * kEmbd],
                             kEmbd * sizeof(float)))
        << "token " << t;
    const auto want = ReferenceToken(experts, all, &x[t * kEmbd], t, kEmbd);
    for (int64_t c = 0; c < kEmbd; ++c) {
      EXPECT_NEAR(batched[t * kEmbd + c], want[c],
                  1e-5 + 1e-4 * std::fabs(want[c]))
          << "token " << t << " value " << c;
    }
  }
}

}  // namespace
}  // namespace kvault
