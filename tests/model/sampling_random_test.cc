// The stages that draw: each against the random stream it must consume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "model/sampling_stages.h"
#include "sampling_test_util.h"

namespace kvault::sampling {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();

const std::vector<double> kProbs = {0.5, 0.3, 0.15, 0.05};

// The dist draw spelled out: float weights exp(l - max) summed in double,
// one uniform double u, the first candidate whose running sum reaches
// u * sum.
size_t ExpectedDraw(const std::vector<float>& logits, std::mt19937* rng) {
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
    if (running >= target) return i;
  }
  return w.size() - 1;
}

TEST(SamplingRandomTest, DistDrawsOneUniformDoublePerStep) {
  const std::vector<float> logits = {0.3f, -1.0f, 2.0f, 0.0f, 1.5f};
  auto dist = MakeDist(1234);
  std::mt19937 reference(1234);
  std::map<int64_t, int> counts;
  for (int step = 0; step < 300; ++step) {
    Row row(logits);
    dist->Apply(&row.view);
    ASSERT_EQ(row.view.selected,
              static_cast<int64_t>(ExpectedDraw(logits, &reference)))
        << "step " << step;
    ++counts[row.view.selected];
    float sum = 0;
    for (const Candidate& c : row.data) sum += c.p;
    EXPECT_NEAR(sum, 1.0f, 1e-6);
  }
  EXPECT_EQ(counts.size(), 5u);  // it really draws
}

TEST(SamplingRandomTest, DistConsumesTheStreamEvenWithOneCandidate) {
  // llama.cpp b10573 draws (and discards) a number when one candidate is
  // left, so the next real draw sees the stream two outputs further on.
  auto dist = MakeDist(99);
  std::mt19937 reference(99);
  const std::vector<float> logits = LogitsOf(kProbs);
  for (int step = 0; step < 50; ++step) {
    Row single({4.0f});
    dist->Apply(&single.view);
    EXPECT_EQ(single.view.selected, 0);
    EXPECT_EQ(single.data[0].p, 1.0f);
    reference.discard(2);
    Row row(logits);
    dist->Apply(&row.view);
    ASSERT_EQ(row.view.selected,
              static_cast<int64_t>(ExpectedDraw(logits, &reference)));
  }
  Row empty({});
  dist->Apply(&empty.view);
  EXPECT_EQ(empty.view.selected, -1);
}

TEST(SamplingRandomTest, DistResetReseeds) {
  auto dist = MakeDist(7);
  const std::vector<float> logits = LogitsOf(kProbs);
  auto run = [&] {
    std::vector<int64_t> picks;
    for (int i = 0; i < 40; ++i) {
      Row row(logits);
      dist->Apply(&row.view);
      picks.push_back(row.view.selected);
    }
    return picks;
  };
  const auto first = run();
  dist->Reset();
  EXPECT_EQ(run(), first);
}

TEST(SamplingRandomTest, XtcCutsAllButTheLeastLikelyAboveTheThreshold) {
  // Above 0.1: tokens 0, 1, 2; all but the last of them (2) go.
  Row row(LogitsOf(kProbs));
  MakeXtc(1.0f, 0.1f, 0, 1)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), ElementsAre(2, 3));
  // min_keep 3 would leave too few: nothing is cut.
  Row keep(LogitsOf(kProbs));
  MakeXtc(1.0f, 0.1f, 3, 1)->Apply(&keep.view);
  EXPECT_EQ(keep.view.size, 4u);
  // Only one token above the threshold: nothing is cut either.
  Row one(LogitsOf(kProbs));
  MakeXtc(1.0f, 0.4f, 0, 1)->Apply(&one.view);
  EXPECT_EQ(one.view.size, 4u);
  EXPECT_EQ(MakeXtc(0.0f, 0.1f, 0, 1), nullptr);
  EXPECT_EQ(MakeXtc(1.0f, 0.51f, 0, 1), nullptr);
}

TEST(SamplingRandomTest, XtcFiresWithItsProbabilityFromAFloatDraw) {
  // One uniform float per step decides: it fires when u <= probability.
  auto xtc = MakeXtc(0.3f, 0.1f, 0, 2024);
  std::mt19937 reference(2024);
  int fired = 0;
  for (int step = 0; step < 400; ++step) {
    Row row(LogitsOf(kProbs));
    xtc->Apply(&row.view);
    const float u = std::uniform_real_distribution<float>(0, 1)(reference);
    EXPECT_EQ(row.view.size == 2, u <= 0.3f) << "step " << step;
    fired += row.view.size == 2;
  }
  EXPECT_NEAR(fired / 400.0, 0.3, 0.08);
  // A single candidate draws nothing.
  Row single({1.0f});
  xtc->Apply(&single.view);
  EXPECT_EQ(single.view.size, 1u);
}

TEST(SamplingRandomTest, MirostatV2TruncatesBySurpriseAndLearns) {
  // tau 1.5: mu starts at 3 bits, so tokens with p < 1/8 are cut first.
  auto mirostat = MakeMirostatV2(5, 1.5f, 0.5f);
  Row row(LogitsOf(kProbs));
  mirostat->Apply(&row.view);
  EXPECT_EQ(row.view.size, 3u);  // 0.05 is 4.3 bits: out
  ASSERT_GE(row.view.selected, 0);
  ASSERT_LT(row.view.selected, 3);
  float sum = 0;
  for (size_t i = 0; i < row.view.size; ++i) sum += row.view.data[i].p;
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  // The draw is llama.cpp's std::discrete_distribution over those p.
  std::mt19937 reference(5);
  std::vector<float> p;
  for (size_t i = 0; i < row.view.size; ++i) p.push_back(row.view.data[i].p);
  EXPECT_EQ(row.view.selected,
            std::discrete_distribution<int>(p.begin(), p.end())(reference));
  // Reset restores mu and the stream: the same first choice again.
  const int64_t first = row.view.selected;
  for (int i = 0; i < 20; ++i) {
    Row again(LogitsOf(kProbs));
    mirostat->Apply(&again.view);
  }
  mirostat->Reset();
  Row after(LogitsOf(kProbs));
  mirostat->Apply(&after.view);
  EXPECT_EQ(after.view.size, 3u);
  EXPECT_EQ(after.view.selected, first);
}

TEST(SamplingRandomTest, MirostatKeepsAtLeastOneToken) {
  // A tiny tau drives mu below every surprise: one token stays.
  auto mirostat = MakeMirostatV2(1, 0.01f, 1.0f);
  for (int i = 0; i < 10; ++i) {
    Row row(LogitsOf(kProbs));
    mirostat->Apply(&row.view);
    EXPECT_GE(row.view.size, 1u);
    EXPECT_EQ(row.view.selected, 0);
  }
  // Mirostat 1.0 estimates k from the top tokens; with a very peaked row
  // it keeps the best one.
  auto v1 = MakeMirostat(4, 3, 0.01f, 1.0f, 100);
  Row peaked({20.0f, 0.0f, -1.0f, -2.0f});
  v1->Apply(&peaked.view);
  EXPECT_EQ(peaked.view.data[peaked.view.selected].id, 0);
}

TEST(SamplingRandomTest, AdaptivePPrefersTokensNearTheTarget) {
  // Off (negative target): a plain draw from the distribution.
  auto off = MakeAdaptiveP(-1.0f, 0.9f, 11);
  std::mt19937 reference(11);
  const std::vector<float> p = {0.5f, 0.3f, 0.15f, 0.05f};
  for (int i = 0; i < 30; ++i) {
    Row row(LogitsOf(kProbs));
    off->Apply(&row.view);
    std::vector<float> probs;
    for (const Candidate& c : row.data) probs.push_back(c.p);
    EXPECT_EQ(row.view.selected, std::discrete_distribution<int>(
                                     probs.begin(), probs.end())(reference));
  }
  // Target 0.3: token 1 (p 0.3) gets the peak logit and most draws.
  auto on = MakeAdaptiveP(0.3f, 0.9f, 12);
  std::map<TokenId, int> counts;
  for (int i = 0; i < 300; ++i) {
    Row row(LogitsOf(kProbs));
    on->Apply(&row.view);
    const TokenId id = row.view.data[row.view.selected].id;
    ++counts[id];
    on->Accept(id);
  }
  EXPECT_GT(counts[1], 200);
  // Masked tokens stay masked.
  Row masked({0.0f, -kInf, 0.0f});
  on->Apply(&masked.view);
  EXPECT_EQ(masked.data[1].logit, -kInf);
  EXPECT_NE(masked.view.data[masked.view.selected].id, 1);
}

}  // namespace
}  // namespace kvault::sampling
