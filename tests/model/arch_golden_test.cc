// Against llama.cpp, per architecture: every model in ../shared/models/arch
// (small random-weight models of each family, F32 and Q8_0) either loads
// and reproduces llama-server's greedy tokens and top-5 log-probabilities
// (../shared/golden/arch), or is listed here as not supported yet and
// fails to load with an Unimplemented error naming its architecture. A
// file in the folder that is on neither list fails the test, so the lists
// stay honest as architectures land.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "golden_runner.h"
#include "model/ggml_compat.h"
#include "model/inference.h"

namespace kvault {
namespace {

const std::string kShared = std::string(KVAULT_SOURCE_DIR) + "/../shared";
const std::string kModels = kShared + "/models/arch/";
const std::string kGoldens = kShared + "/golden/arch/";

// What must agree with llama.cpp b10573's AVX-512 build, which recorded
// golden/arch. Issue 25's bar is all 64 greedy tokens and the first
// step's top-5 logprobs within 1e-3 for F32, the first 8 tokens for Q8_0.
// Both go further here, with room: every model matches all 64 tokens;
// Q8_0 every step's logprobs within 4.7e-6 (measured, mixtral), F32, summed in
// the AVX-512 build's vec_dot_f32 and tinyBLAS orders (ggml_compat.h), every
// step's within 6.8e-5 (measured, gemma2; most within 8e-6).
constexpr int kF32Tokens = 64;
constexpr double kF32Tol = 1e-3;  // every step
constexpr int kQ8Tokens = 64;
constexpr double kQ8Tol = 1e-4;  // every step

// Models kvault runs (file stems without the .f32/.q8_0 suffix).
const std::vector<std::string> kSupported = {"qwen2",   "qwen3",   "llama31",
                                             "phi3",    "gemma2",  "gemma3",
                                             "mixtral", "qwen3moe"};

// Models kvault refuses today, and the text the load error must contain
// (the architecture and what is missing), so a refusal is precise.
struct Unsupported {
  std::string name;
  std::string error;  // substring of the Unimplemented message
};
const std::vector<Unsupported> kUnsupported = {};

bool HaveShared() { return std::filesystem::exists(kModels); }

// The llama.cpp build that recorded golden/arch: b10573's AVX-512 build
// (../shared/tools/llama.cpp); `build` kAvx2 replays its AVX2 build's
// recordings (testdata/golden-avx2/arch) in that build's numerics mode,
// what kvault computes by default on an AVX2-only CPU.
ComputeBackendOptions GoldenCompute(
    ggml_compat::GgmlBuild build = ggml_compat::GgmlBuild::kAvx512) {
  ComputeBackendOptions compute;
  compute.num_threads = 2;
  compute.ggml_build = build;
  return compute;
}

const std::string kAvx2Goldens = std::string(KVAULT_SOURCE_DIR) +
                                 "/tests/model/testdata/golden-avx2/arch/";

TEST(ArchGoldenTest, EveryModelInTheFolderIsListed) {
  if (!HaveShared()) GTEST_SKIP() << "missing " << kModels;
  std::set<std::string> listed(kSupported.begin(), kSupported.end());
  for (const Unsupported& u : kUnsupported) listed.insert(u.name);
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".gguf") continue;
    ++seen;
    const std::string stem = file.substr(0, file.find('.'));
    EXPECT_TRUE(listed.count(stem))
        << file << " is on neither kSupported nor kUnsupported";
  }
  EXPECT_GT(seen, 0);
}

struct ArchCase {
  std::string name;  // file stem, e.g. "qwen2"
  std::string type;  // "f32" or "q8_0"
  // The llama.cpp build whose recording is replayed (kAvx2: golden-avx2).
  ggml_compat::GgmlBuild build = ggml_compat::GgmlBuild::kAvx512;
};

class ArchGoldenTest : public ::testing::TestWithParam<ArchCase> {};

TEST_P(ArchGoldenTest, GreedyGenerationMatchesLlamaCpp) {
  const ArchCase& a = GetParam();
  const std::string stem = a.name + "." + a.type;
  if (!HaveShared()) GTEST_SKIP() << "missing " << kModels;
  const ComputeBackendOptions compute = GoldenCompute(a.build);
  auto model = LlamaModel::Load(kModels + stem + ".gguf", LoadMode::kRead,
                                compute.isa);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const bool avx2 = a.build == ggml_compat::GgmlBuild::kAvx2;
  const nlohmann::json golden =
      golden::ReadGolden((avx2 ? kAvx2Goldens : kGoldens) + stem + ".json");
  const bool f32 = a.type == "f32";
  const size_t num_steps = f32 ? kF32Tokens : kQ8Tokens;
  for (const auto& c : golden.at("cases")) {
    SCOPED_TRACE("prompt: " + c.at("prompt").get<std::string>());
    const golden::CaseResult r =
        golden::RunGoldenCase(**model, compute, c, num_steps);
    std::cout << stem << ": " << r.num_matching << "/" << num_steps
              << " tokens match, max top-5 logprob error " << r.MaxErr()
              << " (first step " << r.FirstErr() << ")\n";
    EXPECT_EQ(r.num_matching, static_cast<int>(num_steps));
    EXPECT_LE(r.MaxErr(), f32 ? kF32Tol : kQ8Tol);
  }
}

std::vector<ArchCase> SupportedCases() {
  std::vector<ArchCase> cases;
  for (const std::string& name : kSupported) {
    for (ggml_compat::GgmlBuild build :
         {ggml_compat::GgmlBuild::kAvx512, ggml_compat::GgmlBuild::kAvx2}) {
      cases.push_back({name, "f32", build});
      cases.push_back({name, "q8_0", build});
    }
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<ArchCase>& info) {
  const bool avx2 = info.param.build == ggml_compat::GgmlBuild::kAvx2;
  return info.param.name + "_" + info.param.type + (avx2 ? "_avx2_build" : "");
}

INSTANTIATE_TEST_SUITE_P(Arch, ArchGoldenTest,
                         ::testing::ValuesIn(SupportedCases()), CaseName);

// Greedy-decodes `steps` tokens after golden case `c`'s prompt as sequence
// 0 of `cache`, returning each step's logits. With `other` (a second
// prompt), sequence 1 is prefilled first and then decodes alongside in
// every batch, so sequence 0's cells land in other pages and its batches
// hold another sequence's token.
std::vector<std::vector<float>> DecodeSteps(const LlamaModel& model,
                                            KvCache* cache,
                                            const nlohmann::json& c,
                                            const std::vector<TokenId>* other,
                                            int steps) {
  InferenceContext ctx(&model, cache, GoldenCompute());
  std::vector<BatchToken> batch;
  Pos other_pos = 0;
  if (other != nullptr) {
    for (TokenId t : *other) batch.push_back({SeqId(1), t, other_pos++});
    EXPECT_TRUE(ctx.Decode(batch).ok());
    batch.clear();
  }
  const auto prompt = c.at("prompt_ids").get<std::vector<TokenId>>();
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back(
        {SeqId(0), prompt[i], static_cast<Pos>(i), i + 1 == prompt.size()});
  }
  std::vector<std::vector<float>> out;
  for (int step = 0; step < steps; ++step) {
    if (other != nullptr) batch.push_back({SeqId(1), 7, other_pos++});
    auto logits = ctx.Decode(batch);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    if (!logits.ok()) break;
    logits->resize(model.n_vocab());  // sequence 0's, the first wanted
    const TokenId next = static_cast<TokenId>(
        std::max_element(logits->begin(), logits->end()) - logits->begin());
    out.push_back(std::move(*logits));
    batch = {{SeqId(0), next, static_cast<Pos>(prompt.size() + step), true}};
  }
  return out;
}

// Same bits whatever the batch and the page placement: each architecture's
// forward pass keeps a token's logits independent of both.
TEST_P(ArchGoldenTest, BatchingAndPagesAreInvisible) {
  const ArchCase& a = GetParam();
  const std::string stem = a.name + "." + a.type;
  if (!HaveShared()) GTEST_SKIP() << "missing " << kModels;
  auto model = LlamaModel::Load(kModels + stem + ".gguf", LoadMode::kRead,
                                GoldenCompute().isa);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const nlohmann::json golden = golden::ReadGolden(kGoldens + stem + ".json");
  const auto& c = golden.at("cases").at(0);
  const auto other =
      golden.at("cases").at(1).at("prompt_ids").get<std::vector<TokenId>>();
  auto make_cache = [&](uint32_t page_size) {
    KvCacheOptions options;
    options.page_size = page_size;
    options.num_pages = 256 / page_size;
    options.layout = (*model)->KvLayoutFor(KvDtype::kF16);
    return KvCache::Create(options);
  };
  auto alone_cache = make_cache(16);
  auto mixed_cache = make_cache(4);
  ASSERT_TRUE(alone_cache.ok() && mixed_cache.ok());
  const auto alone = DecodeSteps(**model, alone_cache->get(), c, nullptr, 6);
  const auto mixed = DecodeSteps(**model, mixed_cache->get(), c, &other, 6);
  ASSERT_EQ(alone.size(), 6u);
  ASSERT_EQ(mixed.size(), 6u);
  for (size_t step = 0; step < alone.size(); ++step) {
    EXPECT_EQ(0, std::memcmp(alone[step].data(), mixed[step].data(),
                             alone[step].size() * sizeof(float)))
        << "step " << step;
  }
}

class ArchUnsupportedTest : public ::testing::TestWithParam<Unsupported> {};

// A refused architecture is a precise Unimplemented error, never a crash,
// a half-loaded model or a generic "tensor missing".
TEST_P(ArchUnsupportedTest, FailsToLoadNamingTheArchitecture) {
  const Unsupported& u = GetParam();
  if (!HaveShared()) GTEST_SKIP() << "missing " << kModels;
  for (const std::string type : {"f32", "q8_0"}) {
    const std::string path = kModels + u.name + "." + type + ".gguf";
    auto model = LlamaModel::Load(path);
    ASSERT_FALSE(model.ok()) << path
                             << " loads now: move it to kSupported and "
                                "check it against its golden";
    EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented)
        << model.status().ToString();
    EXPECT_NE(model.status().ToString().find(u.error), std::string::npos)
        << model.status().ToString();
  }
}

// Empty while every model in the folder runs.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ArchUnsupportedTest);
INSTANTIATE_TEST_SUITE_P(
    Arch, ArchUnsupportedTest, ::testing::ValuesIn(kUnsupported),
    [](const ::testing::TestParamInfo<Unsupported>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace kvault
