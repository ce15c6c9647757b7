// Against llama.cpp: greedy generation on the models in ../shared/models
// reproduces the token ids and top-5 log-probabilities llama-server
// recorded (../shared/golden, format in ../shared/README.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/inference.h"

namespace kvault {
namespace {

const std::string kShared = std::string(KVAULT_SOURCE_DIR) + "/../shared";

// What must agree with llama.cpp. Logprobs are compared within 1e-3 on the
// first `strict_steps` generated tokens and within `drift_tol` after: with
// an F16 KV cache a difference in the last bit of a K/V value (summation
// order in a matmul) can flip its fp16 rounding, and on the tiny
// stories260K model such flips accumulate to ~1e-2 over 64 steps. Measured:
// our scalar, AVX2 and AVX-512 kernels (same operations, other summation
// orders) disagree with each other by up to 1.5e-2 (F32 weights) and 1e-2
// (F16) over these cases with an F16 cache, but by only ~5e-6 with an F32
// cache; tiny-random-f32 stays within 3e-5 either way. A 1e-3 bound on every
// step would need llama.cpp's CPU build (its ISA's summation orders, vector
// expf, FMA contractions) reproduced bit for bit.
struct GoldenSpec {
  std::string name;  // file stem in models/ and golden/
  int exact_tokens;  // leading gen_ids that must match exactly
  int strict_steps;  // steps whose top-5 logprobs are within 1e-3
  double drift_tol;  // bound on later steps; < 0: not checked
};

std::vector<double> LogSoftmax(const float* logits, size_t n) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double{logits[i]} - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
  return out;
}

class GoldenTest : public ::testing::TestWithParam<GoldenSpec> {};

TEST_P(GoldenTest, GreedyGenerationMatchesLlamaCpp) {
  const GoldenSpec& spec = GetParam();
  const std::string model_path = kShared + "/models/" + spec.name + ".gguf";
  const std::string golden_path = kShared + "/golden/" + spec.name + ".json";
  if (!std::filesystem::exists(model_path) ||
      !std::filesystem::exists(golden_path)) {
    GTEST_SKIP() << "missing " << model_path << " or " << golden_path;
  }
  auto model = LlamaModel::Load(model_path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::ifstream in(golden_path);
  const nlohmann::json golden = nlohmann::json::parse(in);
  const size_t n_vocab = (*model)->n_vocab();
  ThreadPool pool(2);
  for (const auto& c : golden.at("cases")) {
    SCOPED_TRACE("prompt: " + c.at("prompt").get<std::string>());
    const auto prompt = c.at("prompt_ids").get<std::vector<TokenId>>();
    const auto gen_ids = c.at("gen_ids").get<std::vector<TokenId>>();
    const auto& steps = c.at("steps");
    // llama.cpp's default KV cache type is F16.
    KvCacheOptions options;
    options.num_pages = 16;
    options.page_size = 16;
    options.layout = (*model)->KvLayoutFor(KvDtype::kF16);
    auto cache = KvCache::Create(options);
    ASSERT_TRUE(cache.ok());
    InferenceContext ctx(model->get(), cache->get(), &pool);
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.push_back(
          {SeqId(0), prompt[i], static_cast<Pos>(i), i + 1 == prompt.size()});
    }
    int num_matching = 0;
    double max_err = 0;
    for (size_t step = 0; step < gen_ids.size(); ++step) {
      auto logits = ctx.Decode(batch);
      ASSERT_TRUE(logits.ok()) << logits.status().ToString();
      const TokenId next = static_cast<TokenId>(
          std::max_element(logits->begin(), logits->end()) - logits->begin());
      if (next != gen_ids[step]) break;
      ++num_matching;
      const double tol =
          static_cast<int>(step) < spec.strict_steps ? 1e-3 : spec.drift_tol;
      const auto logprobs = LogSoftmax(logits->data(), n_vocab);
      for (const auto& top : steps.at(step).at("top")) {
        const TokenId id = top.at("id").get<TokenId>();
        const double err =
            std::abs(logprobs.at(id) - top.at("logprob").get<double>());
        max_err = std::max(max_err, err);
        if (tol >= 0) {
          EXPECT_LE(err, tol) << "step " << step << " token " << id;
        }
      }
      batch = {{SeqId(0), next, static_cast<Pos>(prompt.size() + step), true}};
    }
    std::cout << spec.name << ": " << num_matching << "/" << gen_ids.size()
              << " tokens match, max top-5 logprob error " << max_err << "\n";
    EXPECT_GE(num_matching, std::min<int>(spec.exact_tokens, gen_ids.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GoldenTest,
    ::testing::Values(GoldenSpec{"stories260K", 64, 1, 0.03},
                      GoldenSpec{"stories260K.f16", 64, 0, 0.03},
                      GoldenSpec{"tiny-random-f32", 64, 64, 1e-3},
                      GoldenSpec{"stories260K.q8_0", 8, 0, -1}),
    [](const auto& info) {
      std::string name = info.param.name;
      std::replace(name.begin(), name.end(), '.', '_');
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

}  // namespace
}  // namespace kvault
