// Replays one llama-server golden case (../shared/golden format, see
// ../shared/README.md) through kvault's forward pass: the prompt as one
// batch, then one greedy token per step, comparing each step's choice and
// top-5 log-probabilities with the recorded ones. Shared by golden_test
// and arch_golden_test so both judge kvault the same way.
#ifndef KVAULT_TESTS_MODEL_GOLDEN_RUNNER_H_
#define KVAULT_TESTS_MODEL_GOLDEN_RUNNER_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/inference.h"

namespace kvault::golden {

// What one case's replay found.
struct CaseResult {
  int num_matching = 0;          // leading steps whose greedy id matched
  std::vector<double> step_err;  // [num_matching] max |top-5 logprob error|
  // Returns the largest error over the matching steps (0 when none).
  double MaxErr() const {
    return step_err.empty()
               ? 0.0
               : *std::max_element(step_err.begin(), step_err.end());
  }
  // Returns the first step's error (0 when it did not match).
  double FirstErr() const { return step_err.empty() ? 0.0 : step_err[0]; }
};

// Returns log-softmax of `n` logits, in double.
inline std::vector<double> LogSoftmax(const float* logits, size_t n) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double{logits[i]} - max);
  const double log_sum = std::log(sum) + max;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
  return out;
}

// Returns the parsed golden file at `path`.
inline nlohmann::json ReadGolden(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Replays golden case `c` for up to `num_steps` steps on a fresh F16 KV
// cache (llama.cpp's default type), stopping at the first greedy id that
// differs. Records a gtest failure (and returns what it had) if a Decode
// fails.
inline CaseResult RunGoldenCase(const LlamaModel& model,
                                const ComputeBackendOptions& compute,
                                const nlohmann::json& c, size_t num_steps) {
  CaseResult result;
  const auto prompt = c.at("prompt_ids").get<std::vector<TokenId>>();
  const auto gen_ids = c.at("gen_ids").get<std::vector<TokenId>>();
  const auto& steps = c.at("steps");
  KvCacheOptions options;
  options.num_pages = 16;
  options.page_size = 16;
  options.layout = model.KvLayoutFor(KvDtype::kF16);
  auto cache = KvCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  if (!cache.ok()) return result;
  InferenceContext ctx(&model, cache->get(), compute);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back(
        {SeqId(0), prompt[i], static_cast<Pos>(i), i + 1 == prompt.size()});
  }
  num_steps = std::min(num_steps, gen_ids.size());
  for (size_t step = 0; step < num_steps; ++step) {
    auto logits = ctx.Decode(batch);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    if (!logits.ok()) break;
    const TokenId next = static_cast<TokenId>(
        std::max_element(logits->begin(), logits->end()) - logits->begin());
    if (next != gen_ids[step]) break;
    ++result.num_matching;
    const auto logprobs = LogSoftmax(logits->data(), model.n_vocab());
    double err = 0;
    for (const auto& top : steps.at(step).at("top")) {
      const TokenId id = top.at("id").get<TokenId>();
      err = std::max(
          err, std::abs(logprobs.at(id) - top.at("logprob").get<double>()));
    }
    result.step_err.push_back(err);
    batch = {{SeqId(0), next, static_cast<Pos>(prompt.size() + step), true}};
  }
  return result;
}

}  // namespace kvault::golden

#endif  // KVAULT_TESTS_MODEL_GOLDEN_RUNNER_H_
