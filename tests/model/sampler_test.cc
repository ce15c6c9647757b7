#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvault {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Only the filter under test is on.
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

const std::vector<double> kProbs = {0.5, 0.3, 0.15, 0.05};

TEST(ArgMaxTest, LowestIdWinsTiesAndNaNIsIgnored) {
  EXPECT_EQ(ArgMax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{kNaN, 0, 5, 5}), 2);
  EXPECT_EQ(ArgMax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(ArgMax(std::vector<float>{kNaN, kNaN, -1}), 2);
}

TEST(SamplerTest, GreedyIsArgMaxWhateverTheSeed) {
  const std::vector<float> logits = {0.5f, 2.0f, 7.0f, 7.0f, -3.0f};
  for (uint64_t seed : {1u, 2u, 999u}) {
    SamplingParams params = SamplingParams::Greedy();
    params.seed = seed;
    Sampler sampler(params);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sampler.Sample(logits), 2);
  }
}

TEST(SamplerTest, DefaultsAreLlamaServers) {
  const SamplingParams p;
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_TRUE(p.Validate().ok());
}

TEST(SamplerTest, ValidateRejectsBadValues) {
  SamplingParams p;
  p.temperature = kNaN;
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.top_p = -0.1f;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("top_p"));
  p = SamplingParams();
  p.min_p = kNaN;
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.repeat_penalty = 0;
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.repeat_last_n = -1;
  EXPECT_FALSE(p.Validate().ok());
}

TEST(SamplerTest, ValidateHoldsEachFieldToItsDomain) {
  // min_p 1.5 once removed every candidate and the draw read past an empty
  // vector (issue 17, fault 1).
  const std::vector<std::pair<const char*, SamplingParams>> bad = [] {
    std::vector<std::pair<const char*, SamplingParams>> v;
    SamplingParams p;
    p.min_p = 1.5f;
    v.push_back({"min_p", p});
    p = SamplingParams();
    p.top_p = 1.01f;
    v.push_back({"top_p", p});
    p = SamplingParams();
    p.temperature = std::numeric_limits<float>::infinity();
    v.push_back({"temperature", p});
    p = SamplingParams();
    p.repeat_penalty = std::numeric_limits<float>::infinity();
    v.push_back({"repeat_penalty", p});
    return v;
  }();
  for (const auto& [field, params] : bad) {
    SCOPED_TRACE(field);
    const Status s = params.Validate();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.reason(), "out_of_range");
    EXPECT_THAT(s.message(), ::testing::HasSubstr(std::string("'") + field));
  }
  SamplingParams edges;
  edges.min_p = 1.0f;
  edges.top_p = 0.0f;
  edges.temperature = -2.0f;  // <= 0 is greedy, as in llama.cpp
  EXPECT_TRUE(edges.Validate().ok());
}

TEST(SamplerTest, MinPOfOneKeepsOnlyTheBest) {
  const std::vector<float> logits = LogitsOf(kProbs);
  SamplingParams p = NoFilters(1.0f, /*seed=*/5);
  p.min_p = 1.0f;
  Sampler sampler(p);
  EXPECT_EQ(Support(Histogram(&sampler, logits, 500)), (std::set<TokenId>{0}));
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  // Tokens 1 and 3 tie for second place: the lower id stays in.
  const std::vector<float> logits = {0.0f, 1.0f, 3.0f, 1.0f, 0.5f};
  SamplingParams p = NoFilters(/*temperature=*/5.0f, /*seed=*/7);
  p.top_k = 2;
  Sampler sampler(p);
  EXPECT_EQ(Support(Histogram(&sampler, logits, 2000)),
            (std::set<TokenId>{1, 2}));
  p.top_k = 1;
  Sampler one(p);
  EXPECT_EQ(Support(Histogram(&one, logits, 200)), (std::set<TokenId>{2}));
}

TEST(SamplerTest, TopPKeepsTheTokenThatCrossesP) {
  const std::vector<float> logits = LogitsOf(kProbs);
  const std::vector<std::pair<float, std::set<TokenId>>> cases = {
      {0.45f, {0}}, {0.7f, {0, 1}}, {0.85f, {0, 1, 2}}, {0.99f, {0, 1, 2, 3}}};
  for (const auto& [top_p, want] : cases) {
    SCOPED_TRACE(top_p);
    SamplingParams p = NoFilters(1.0f, /*seed=*/11);
    p.top_p = top_p;
    Sampler sampler(p);
    EXPECT_EQ(Support(Histogram(&sampler, logits, 5000)), want);
  }
}

TEST(SamplerTest, TopPRunsAfterTopK) {
  // Over the two tokens top-k leaves, token 0 holds 0.5/0.8 = 0.625 of the
  // mass, so top_p 0.6 keeps it alone (over all four it would keep 0 and 1).
  SamplingParams p = NoFilters(1.0f, /*seed=*/3);
  p.top_k = 2;
  p.top_p = 0.6f;
  Sampler sampler(p);
  EXPECT_EQ(Support(Histogram(&sampler, LogitsOf(kProbs), 2000)),
            (std::set<TokenId>{0}));
}

TEST(SamplerTest, MinPKeepsTokensAboveAFractionOfTheBest) {
  const std::vector<float> logits = LogitsOf(kProbs);
  const std::vector<std::pair<float, std::set<TokenId>>> cases = {
      {0.2f, {0, 1, 2}}, {0.5f, {0, 1}}, {0.9f, {0}}, {0.05f, {0, 1, 2, 3}}};
  for (const auto& [min_p, want] : cases) {
    SCOPED_TRACE(min_p);
    SamplingParams p = NoFilters(1.0f, /*seed=*/5);
    p.min_p = min_p;
    Sampler sampler(p);
    EXPECT_EQ(Support(Histogram(&sampler, logits, 5000)), want);
  }
}

// Draws 40000 times and compares frequencies with softmax(logit / temp);
// the bound is > 7 standard deviations, so only a wrong sampler fails.
void ExpectFrequencies(float temperature, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "temperature " << temperature << " seed "
                                  << seed);
  const std::vector<float> logits = LogitsOf(kProbs);
  Sampler sampler(NoFilters(temperature, seed));
  constexpr int kDraws = 40000;
  const std::map<TokenId, int> counts = Histogram(&sampler, logits, kDraws);
  double total = 0;
  for (double q : kProbs) total += std::pow(q, 1.0 / temperature);
  for (size_t id = 0; id < kProbs.size(); ++id) {
    const double want = std::pow(kProbs[id], 1.0 / temperature) / total;
    const auto it = counts.find(static_cast<TokenId>(id));
    const double got = it == counts.end() ? 0 : double(it->second) / kDraws;
    EXPECT_NEAR(got, want, 0.018) << "token " << id;
  }
}

TEST(SamplerTest, FrequenciesFollowTheTemperedSoftmax) {
  ExpectFrequencies(1.0f, 1234);
  ExpectFrequencies(2.0f, 99);
  ExpectFrequencies(0.5f, 4321);
}

TEST(SamplerTest, LowTemperatureIsNearlyGreedy) {
  Sampler sampler(NoFilters(0.05f, /*seed=*/8));
  const std::map<TokenId, int> counts =
      Histogram(&sampler, LogitsOf(kProbs), 2000);
  EXPECT_GE(counts.at(0), 1990);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferent) {
  const std::vector<float> logits = LogitsOf(kProbs);
  auto draw = [&](uint64_t seed) {
    Sampler sampler(NoFilters(1.0f, seed));
    std::vector<TokenId> ids;
    for (int i = 0; i < 200; ++i) ids.push_back(sampler.Sample(logits));
    return ids;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
  Sampler sampler(NoFilters(1.0f, 42));
  std::vector<TokenId> first;
  for (int i = 0; i < 200; ++i) first.push_back(sampler.Sample(logits));
  sampler.Reset();
  std::vector<TokenId> again;
  for (int i = 0; i < 200; ++i) again.push_back(sampler.Sample(logits));
  EXPECT_EQ(first, again);
  EXPECT_EQ(first, draw(42));
}

TEST(SamplerTest, SeededOutputIsPinned) {
  // mt19937_64 and our uniform are fully specified, so these ids must be the
  // same with every compiler and standard library.
  Sampler sampler(NoFilters(1.0f, /*seed=*/2024));
  std::vector<TokenId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(sampler.Sample(LogitsOf(kProbs)));
  EXPECT_THAT(ids, ElementsAre(1, 1, 0, 0, 0, 0, 2, 1, 0, 1, 1, 1));
}

TEST(SamplerTest, RandomSeedIsDrawnAndReported) {
  SamplingParams p;
  p.seed = kRandomSeed;
  Sampler sampler(p);
  EXPECT_NE(sampler.seed(), kRandomSeed);
  SamplingParams fixed;
  fixed.seed = 5;
  EXPECT_EQ(Sampler(fixed).seed(), 5u);
}

TEST(SamplerTest, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = SamplingParams::Greedy();
  p.repeat_penalty = 1.5f;
  Sampler sampler(p);
  const std::vector<float> logits = {2.0f, 1.9f, -1.0f, -1.2f};
  EXPECT_EQ(sampler.Sample(logits), 0);  // no history yet
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 1);  // 2.0 / 1.5 < 1.9
  // A negative logit is multiplied: -1.0 * 1.5 < -1.2, so token 1 wins.
  const std::vector<float> negative = {-1.0f, -1.2f};
  Sampler neg(p);
  neg.Accept(0);
  neg.Accept(0);  // counted once, like llama.cpp
  EXPECT_EQ(neg.Sample(negative), 1);
}

TEST(SamplerTest, RepeatPenaltyForgetsOldTokens) {
  SamplingParams p = SamplingParams::Greedy();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler sampler(p);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f, 0.0f};
  sampler.Accept(0);
  EXPECT_EQ(sampler.Sample(logits), 1);
  sampler.Accept(2);
  sampler.Accept(3);  // token 0 falls out of the last 2
  EXPECT_EQ(sampler.Sample(logits), 0);
  sampler.Accept(0);
  sampler.Reset();
  EXPECT_EQ(sampler.Sample(logits), 0);
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
  const uint64_t seed = 77;
  SCOPED_TRACE(seed);
  std::mt19937_64 gen(seed);
  std::vector<float> logits(32000);
  for (float& l : logits) l = static_cast<float>(gen() % 10000) / 1000.0f;
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  SamplingParams p;
  p.seed = seed;
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
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) +
                              std::exp(2.0));
  EXPECT_NEAR(top[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top[3].logprob, 1.0 - lse, 1e-6);
  double sum = 0;
  for (const TokenLogprob& t : top) sum += std::exp(t.logprob);
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(TopLogprobsTest, LargeVocabMatchesDirectComputation) {
  std::mt19937_64 gen(5);
  std::vector<float> logits(32000);
  for (float& l : logits) l = static_cast<float>(gen() % 20000) / 1000.0f - 10;
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 5);
  ASSERT_EQ(top.size(), 5u);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_NEAR(top[i].logprob, logits[top[i].id] - std::log(sum), 1e-5);
    if (i > 0) {
      EXPECT_GE(top[i - 1].logprob, top[i].logprob);
    }
  }
  EXPECT_EQ(top[0].id, ArgMax(logits));
  EXPECT_TRUE(TopLogprobs(logits, 0).empty());
}

}  // namespace
}  // namespace kvault
