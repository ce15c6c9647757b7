// The Sampler as a whole: chain construction, the random stream, the
// history, the probabilities it reports. The stages are tested one by one
// in sampling_*_test.cc, and against llama-server in
// sampler_golden_test.cc.
#include "model/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "model/vocab.h"
#include "sampling_test_util.h"

namespace kvault {
namespace {

using sampling::FakeVocab;
using sampling::LogitsOf;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Only the final draw acts (and the temperature, unless 1).
SamplingParams NoFilters(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// Returns how often each token was drawn in `n` samples.
std::map<TokenId, int> Histogram(Sampler* sampler,
                                 const std::vector<float>& logits, int n) {
  std::map<TokenId, int> counts;
  for (int i = 0; i < n; ++i) ++counts[sampler->Sample(logits)];
  return counts;
}

std::set<TokenId> Support(const std::map<TokenId, int>& counts) {
  std::set<TokenId> ids;
  for (const auto& [id, n] : counts) ids.insert(id);
  return ids;
}

// llama.cpp's final draw over an unsorted list, spelled out: float weights
// exp(l - max) summed in double, one uniform double u from the stream, the
// first token whose running sum reaches u * sum.
TokenId ReferenceDraw(const std::vector<float>& logits, std::mt19937* rng) {
  const float max = *std::max_element(logits.begin(), logits.end());
  std::vector<float> w;
  double sum = 0;
  for (float l : logits) {
    w.push_back(std::exp(l - max));
    sum += w.back();
  }
  const double target =
      sum * std::uniform_real_distribution<double>(0, 1)(*rng);
  double running = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    running += w[i];
    if (running >= target) return static_cast<TokenId>(i);
  }
  return static_cast<TokenId>(w.size() - 1);
}

const std::vector<double> kProbs = {0.5, 0.3, 0.15, 0.05};

TEST(ArgMaxTest, LowestIdWinsTiesAndNaNIsIgnored) {
  EXPECT_EQ(ArgMax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{kNaN, 0, 5, 5}), 2);
  EXPECT_EQ(ArgMax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(ArgMax(std::vector<float>{kNaN, kNaN, -1}), 2);
}

TEST(SamplerTest, DrawsFollowLlamaCppsStream) {
  // std::mt19937 seeded with the 32-bit seed, one uniform double per token.
  const std::vector<float> logits = {0.2f, 1.0f, -0.5f, 0.7f, 0.0f};
  for (uint64_t seed : {0ull, 42ull, 0x1'0000'002Aull}) {
    SCOPED_TRACE(seed);
    Sampler sampler(NoFilters(1.0f, seed));
    std::mt19937 reference(static_cast<uint32_t>(seed));
    for (int step = 0; step < 200; ++step) {
      ASSERT_EQ(sampler.Sample(logits), ReferenceDraw(logits, &reference))
          << "step " << step;
    }
  }
}

TEST(SamplerTest, ASingleSurvivorStillAdvancesTheStream) {
  // min_p leaves one token of `peaked` and all of `spread`; llama-server
  // draws (and discards) a number for the single survivor too.
  SamplingParams p = NoFilters(1.0f, 77);
  p.min_p = 0.5f;
  Sampler sampler(p);
  std::mt19937 reference(77);
  const std::vector<float> peaked = {9.0f, 0.0f, 0.0f};
  const std::vector<float> spread = {0.3f, 0.2f, 0.1f};
  for (int step = 0; step < 100; ++step) {
    EXPECT_EQ(sampler.Sample(peaked), 0);
    reference.discard(2);  // a double takes two 32-bit outputs
    ASSERT_EQ(sampler.Sample(spread), ReferenceDraw(spread, &reference))
        << "step " << step;
  }
}

TEST(SamplerTest, GreedyIsTheMostLikelyWhateverTheSeed) {
  const std::vector<float> logits = {0.5f, 2.0f, 7.0f, 6.5f, -3.0f};
  for (uint64_t seed : {1u, 2u, 999u}) {
    SamplingParams params = SamplingParams::Greedy();
    params.seed = seed;
    Sampler sampler(params);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sampler.Sample(logits), 2);
  }
  // Negative temperatures act as 0.
  SamplingParams negative = NoFilters(-1.0f, 3);
  Sampler sampler(negative);
  EXPECT_EQ(Histogram(&sampler, logits, 50), (std::map<TokenId, int>{{2, 50}}));
}

TEST(SamplerTest, SameSeedSameTokensAndResetReplays) {
  const std::vector<float> logits = LogitsOf(kProbs);
  auto draw = [&](uint64_t seed) {
    Sampler sampler(NoFilters(1.0f, seed));
    std::vector<TokenId> ids;
    for (int i = 0; i < 200; ++i) ids.push_back(sampler.Sample(logits));
    return ids;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
  SamplingParams p = NoFilters(1.0f, 42);
  p.repeat_penalty = 1.5f;
  Sampler sampler(p);
  std::vector<TokenId> first;
  for (int i = 0; i < 50; ++i) {
    first.push_back(sampler.Sample(logits));
    sampler.Accept(first.back());
  }
  sampler.Reset();  // the stream and the penalty history start over
  std::vector<TokenId> again;
  for (int i = 0; i < 50; ++i) {
    again.push_back(sampler.Sample(logits));
    sampler.Accept(again.back());
  }
  EXPECT_EQ(first, again);
}

TEST(SamplerTest, RandomSeedIsDrawnAndReported) {
  SamplingParams p;
  p.seed = kRandomSeed;
  const Sampler a(p);
  const Sampler b(p);
  EXPECT_NE(a.seed(), b.seed());  // two draws of 32 random bits
  SamplingParams fixed;
  fixed.seed = 0x7'0000'0005ull;  // only the low 32 bits are used
  EXPECT_EQ(Sampler(fixed).seed(), 5u);
}

TEST(SamplerTest, TheSamplersOrderIsTheChainsOrder) {
  // min_p 0.25 on the raw logits keeps p >= 0.125; after temperature 3
  // the distribution is flatter and all four tokens pass.
  const std::vector<float> logits = LogitsOf(kProbs);
  SamplingParams p = NoFilters(3.0f, 9);
  p.min_p = 0.25f;
  p.samplers = SamplerTypesFromChars("mt");
  Sampler min_p_first(p);
  EXPECT_EQ(Support(Histogram(&min_p_first, logits, 3000)),
            (std::set<TokenId>{0, 1, 2}));
  p.samplers = SamplerTypesFromChars("tm");
  Sampler temperature_first(p);
  EXPECT_EQ(Support(Histogram(&temperature_first, logits, 3000)),
            (std::set<TokenId>{0, 1, 2, 3}));
  // A sampler left out of the list does not run.
  p.samplers = SamplerTypesFromChars("t");
  Sampler no_min_p(p);
  EXPECT_EQ(Support(Histogram(&no_min_p, logits, 3000)).size(), 4u);
}

TEST(SamplerTest, MirostatReplacesTheList) {
  SamplingParams p = NoFilters(1.0f, 4);
  p.samplers = {};  // ignored: temperature then Mirostat
  p.mirostat = 2;
  // tau 1: mu starts at 2 bits and settles where the mean surprise is 1
  // bit, far from 0.05's 4.3 bits.
  p.mirostat_tau = 1.0f;
  Sampler sampler(p);
  EXPECT_EQ(Support(Histogram(&sampler, LogitsOf(kProbs), 200)).count(3), 0u);
  p.mirostat = 1;
  Sampler v1(p);
  EXPECT_FALSE(Histogram(&v1, LogitsOf(kProbs), 50).empty());
}

TEST(SamplerTest, FrequenciesFollowTheTemperedSoftmax) {
  // 40000 draws against softmax(logit / temp); the bound is > 7 standard
  // deviations, so only a wrong sampler fails.
  for (const auto& [temperature, seed] :
       std::vector<std::pair<float, uint64_t>>{
           {1.0f, 1234}, {2.0f, 99}, {0.5f, 4321}}) {
    SCOPED_TRACE(temperature);
    Sampler sampler(NoFilters(temperature, seed));
    constexpr int kDraws = 40000;
    const auto counts = Histogram(&sampler, LogitsOf(kProbs), kDraws);
    double total = 0;
    for (double q : kProbs) total += std::pow(q, 1.0 / temperature);
    for (size_t id = 0; id < kProbs.size(); ++id) {
      const double want = std::pow(kProbs[id], 1.0 / temperature) / total;
      const auto it = counts.find(static_cast<TokenId>(id));
      const double got = it == counts.end() ? 0 : double(it->second) / kDraws;
      EXPECT_NEAR(got, want, 0.018) << "token " << id;
    }
  }
}

TEST(SamplerTest, TopPRunsAfterTopKInTheDefaultOrder) {
  // Over the two tokens top-k leaves, token 0 holds 0.5/0.8 = 0.625 of the
  // mass, so top_p 0.6 keeps it alone (over all four it would keep 0 and 1).
  SamplingParams p = NoFilters(1.0f, 3);
  p.top_k = 2;
  p.top_p = 0.6f;
  Sampler sampler(p);
  EXPECT_EQ(Support(Histogram(&sampler, LogitsOf(kProbs), 2000)),
            (std::set<TokenId>{0}));
}

TEST(SamplerTest, PenaltiesSeeAcceptedTokensOnly) {
  SamplingParams p = SamplingParams::Greedy();
  p.repeat_penalty = 1.5f;
  Sampler sampler(p);
  const std::vector<float> logits = {2.0f, 1.9f, -1.0f, -1.2f};
  EXPECT_EQ(sampler.Sample(logits), 0);
  EXPECT_EQ(sampler.Sample(logits), 0);  // Sample alone records nothing
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 1);  // 2.0 / 1.5 < 1.9
}

TEST(SamplerTest, MinusOneWindowsAreTheSlotContext) {
  SamplingParams p = SamplingParams::Greedy();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = -1;
  SamplerContext context;
  context.n_ctx_slot = 2;  // the window is the last 2 tokens
  Sampler sampler(p, context);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f, 0.0f};
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 1);
  sampler.Accept(2);
  sampler.Accept(3);
  EXPECT_EQ(sampler.Sample(logits), 0);
  EXPECT_EQ(sampler.params().repeat_last_n, 2);
  // With no slot size to resolve it, -1 switches the penalties off.
  Sampler unresolved(p);
  unresolved.Accept(0);
  EXPECT_EQ(unresolved.Sample(logits), 0);
}

TEST(SamplerTest, DryUsesTheContextsVocabulary) {
  // Tokens "t0".."t9" and "\n" (10); "1 2" was followed by "\n" and by 3.
  std::vector<std::string> texts;
  for (int i = 0; i < 10; ++i) texts.push_back("t" + std::to_string(i));
  texts.push_back("\n");
  const FakeVocab vocab(texts);
  SamplingParams p = SamplingParams::Greedy();
  p.dry_multiplier = 5.0f;
  SamplerContext context;
  context.vocab = &vocab;
  std::vector<float> logits(11, 0.0f);
  logits[3] = 1.0f;   // the best, unless DRY lowers it
  logits[10] = 0.9f;  // a breaker: DRY never lowers it
  Sampler sampler(p, context);
  for (TokenId t : {1, 2, 10, 1, 2, 3, 1, 2}) sampler.Accept(t);
  EXPECT_EQ(sampler.Sample(logits), 10);
}

TEST(SamplerTest, LogitBiasBansAndEogBiasIgnoresEos) {
  Vocab vocab;
  vocab.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  vocab.eos = 2;
  const std::vector<LogitBias> eog = EogLogitBias(vocab);
  ASSERT_EQ(eog.size(), 1u);
  EXPECT_EQ(eog[0].token, 2);
  EXPECT_EQ(eog[0].bias, -kInf);
  SamplingParams p = NoFilters(1.0f, 5);
  p.logit_bias = eog;
  p.logit_bias.push_back({4, -kInf});
  Sampler sampler(p);
  const std::vector<float> logits = {0.0f, 0.0f, 5.0f, 1.0f, 4.0f};
  EXPECT_EQ(Support(Histogram(&sampler, logits, 500)),
            (std::set<TokenId>{0, 1, 3}));
}

TEST(SamplerTest, AdaptivePDrawsInsteadOfDist) {
  SamplingParams p = NoFilters(1.0f, 6);
  p.samplers = SamplerTypesFromChars("ta");
  p.adaptive_target = 0.05f;  // the least likely token is the target
  Sampler sampler(p);
  const auto counts = Histogram(&sampler, LogitsOf(kProbs), 400);
  EXPECT_GT(counts.at(3), 200);
}

TEST(SamplerTest, InfillPrefersEndingWhenEndingIsLikely) {
  FakeVocab vocab({"a", "ab", "c", "</s>"});
  vocab.set_eog(3);
  SamplingParams p = NoFilters(1.0f, 8);
  p.samplers = SamplerTypesFromChars("i");
  SamplerContext context;
  context.vocab = &vocab;
  Sampler sampler(p, context);
  // 3 * p(eog) * 4 candidates > p(text): only the end is kept.
  EXPECT_EQ(sampler.Sample(LogitsOf({0.3, 0.3, 0.3, 0.1})), 3);
  // Unlikely ending: "a" absorbs "ab" (it is its prefix), then only
  // tokens above 1 / (texts + 1) stay, and the ending.
  const auto counts =
      Histogram(&sampler, LogitsOf({0.45, 0.3, 0.24, 0.01}), 200);
  EXPECT_GT(counts.at(0), 180);
  EXPECT_EQ(counts.count(1) + counts.count(2), 0u);
}

TEST(SamplerTest, PostSamplingProbsAreTheCandidatesLeft) {
  SamplingParams p = NoFilters(1.0f, 21);
  p.top_p = 0.9f;  // keeps 0.5, 0.3, 0.15
  Sampler sampler(p);
  const TokenId token = sampler.Sample(LogitsOf(kProbs));
  const TokenProbs all = sampler.PostSamplingProbs(10);
  ASSERT_EQ(all.top.size(), 3u);
  EXPECT_EQ(all.top[0].id, 0);
  EXPECT_EQ(all.top[1].id, 1);
  EXPECT_EQ(all.top[2].id, 2);
  EXPECT_NEAR(all.top[0].prob, 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(all.top[0].prob + all.top[1].prob + all.top[2].prob, 1.0, 1e-6);
  EXPECT_EQ(all.chosen, all.top[token].prob);
  EXPECT_EQ(sampler.PostSamplingProbs(2).top.size(), 2u);
  // Greedy leaves one candidate with probability: zeros are not listed.
  Sampler greedy(SamplingParams::Greedy());
  greedy.Sample(LogitsOf(kProbs));
  const TokenProbs one = greedy.PostSamplingProbs(5);
  ASSERT_EQ(one.top.size(), 1u);
  EXPECT_EQ(one.top[0], (TokenProb{0, 1.0f}));
  EXPECT_EQ(one.chosen, 1.0f);
  // Before any Sample there is nothing to report.
  EXPECT_TRUE(Sampler(p).PostSamplingProbs(3).top.empty());
}

TEST(SamplerTest, PreSamplingProbsAreTheSoftmaxOfTheLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  const TokenProbs probs = PreSamplingProbs(logits, 2, /*chosen=*/0);
  const double sum = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  ASSERT_EQ(probs.top.size(), 2u);
  EXPECT_EQ(probs.top[0].id, 1);
  EXPECT_EQ(probs.top[1].id, 2);
  EXPECT_NEAR(probs.top[0].prob, std::exp(3.0) / sum, 1e-6);
  EXPECT_NEAR(probs.top[1].prob, std::exp(2.0) / sum, 1e-6);
  EXPECT_NEAR(probs.chosen, std::exp(1.0) / sum, 1e-6);
  EXPECT_EQ(PreSamplingProbs(logits, 10, 1).top.size(), 3u);
  EXPECT_TRUE(PreSamplingProbs(logits, 0, 1).top.empty());
  EXPECT_NEAR(PreSamplingProbs(logits, 0, 1).chosen, std::exp(3.0) / sum, 1e-6);
}

TEST(SamplerTest, DegenerateLogitsDoNotCrash) {
  SamplingParams p;
  p.seed = 1;
  Sampler sampler(p);
  const std::vector<float> all_bad = {kNaN, -kInf, kNaN};
  const TokenId id = sampler.Sample(all_bad);
  EXPECT_GE(id, 0);
  EXPECT_LT(id, 3);
  EXPECT_EQ(sampler.Sample(std::vector<float>{0.0f, kInf, 1.0f}), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{3.0f}), 0);
}

TEST(SamplerTest, DefaultChainOnALargeVocabStaysInTheTopK) {
  std::mt19937_64 gen(77);
  std::vector<float> logits(32000);
  for (float& l : logits) l = static_cast<float>(gen() % 10000) / 1000.0f;
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  SamplingParams p;
  p.seed = 77;
  p.temperature = 1.5f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler sampler(p);
  std::set<TokenId> seen;
  for (int i = 0; i < 500; ++i) {
    const TokenId id = sampler.Sample(logits);
    seen.insert(id);
    EXPECT_GE(logits[id], sorted[39]);
  }
  EXPECT_GT(seen.size(), 10u);  // it really samples
}

TEST(TopLogprobsTest, SortedLogSoftmaxTiesByLowestId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, kNaN};
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 10);
  ASSERT_EQ(top.size(), logits.size());
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 2);
  EXPECT_EQ(top[3].id, 0);
  EXPECT_EQ(top[4].id, 4);
  EXPECT_EQ(top[4].logprob, -kInf);
  const double lse =
      std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[3].logprob, 1.0 - lse, 1e-6);
  EXPECT_TRUE(TopLogprobs(logits, 0).empty());
}

}  // namespace
}  // namespace kvault
