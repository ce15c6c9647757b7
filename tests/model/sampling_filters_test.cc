// The deterministic stages on small hand-made rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "model/sampling_stages.h"
#include "sampling_test_util.h"

namespace kvault::sampling {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();

const std::vector<double> kProbs = {0.5, 0.3, 0.15, 0.05};

float SumOfP(const CandidateView& view) {
  float sum = 0;
  for (size_t i = 0; i < view.size; ++i) sum += view.data[i].p;
  return sum;
}

TEST(SamplingFiltersTest, OffValuesBuildNoStage) {
  EXPECT_EQ(MakeTopK(0), nullptr);
  EXPECT_EQ(MakeTopK(-3), nullptr);
  EXPECT_EQ(MakeTopP(1.0f, 0), nullptr);
  EXPECT_EQ(MakeMinP(0.0f, 0), nullptr);
  EXPECT_EQ(MakeTypical(1.0f, 0), nullptr);
  EXPECT_EQ(MakeTopNSigma(0.0f), nullptr);
  EXPECT_EQ(MakeTemperature(1.0f), nullptr);
  EXPECT_EQ(MakeTemperatureExt(1.0f, 0.0f, 1.0f), nullptr);
  EXPECT_NE(MakeTemperatureExt(1.0f, 0.5f, 1.0f), nullptr);
  EXPECT_EQ(MakeLogitBias({}), nullptr);
}

TEST(SamplingFiltersTest, TopKKeepsTheKBestInDescendingOrder) {
  Row row({0.0f, 1.0f, 3.0f, 2.0f, 0.5f});
  MakeTopK(3)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), ElementsAre(2, 3, 1));
  EXPECT_TRUE(row.view.sorted);
  Row all({0.0f, 1.0f, 3.0f});
  MakeTopK(10)->Apply(&all.view);  // more than there are: all, sorted
  EXPECT_THAT(Ids(all.view), ElementsAre(2, 1, 0));
}

TEST(SamplingFiltersTest, TopPKeepsTheTokenThatCrossesP) {
  const std::vector<std::pair<float, std::vector<TokenId>>> cases = {
      {0.45f, {0}}, {0.7f, {0, 1}}, {0.85f, {0, 1, 2}}, {0.99f, {0, 1, 2, 3}}};
  for (const auto& [p, want] : cases) {
    SCOPED_TRACE(p);
    Row row(LogitsOf({0.15, 0.5, 0.05, 0.3}));  // unsorted on purpose
    MakeTopP(p, 0)->Apply(&row.view);
    std::vector<TokenId> got = Ids(row.view);
    // Map back: row ids 1, 3, 0, 2 hold 0.5, 0.3, 0.15, 0.05.
    const std::vector<TokenId> by_rank = {1, 3, 0, 2};
    std::vector<TokenId> expect;
    for (TokenId r : want) expect.push_back(by_rank[r]);
    EXPECT_EQ(got, expect);
    EXPECT_TRUE(row.view.sorted);
  }
}

TEST(SamplingFiltersTest, TopPKeepsMinKeep) {
  Row row(LogitsOf(kProbs));
  MakeTopP(0.1f, 3)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), ElementsAre(0, 1, 2));
}

TEST(SamplingFiltersTest, TopPOnALargeUnsortedListKeepsTheSmallestHead) {
  // Over 1024 candidates the stage first sorts only the best 256, and all
  // of them when that is not enough mass.
  std::mt19937 gen(3);
  std::vector<float> logits(3000);
  for (float& l : logits) l = std::uniform_real_distribution<float>(-8, 8)(gen);
  for (float p : {0.3f, 0.999f}) {
    SCOPED_TRACE(p);
    Row row(logits);
    MakeTopP(p, 0)->Apply(&row.view);
    std::vector<TokenId> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
    ASSERT_GT(row.view.size, 1u);
    ASSERT_LT(row.view.size, logits.size());
    // The kept ids are the best ones, in descending order, and the mass
    // before the last one is below p.
    for (size_t i = 0; i < row.view.size; ++i) {
      EXPECT_EQ(row.view.data[i].id, order[i]) << i;
    }
    float before_last = 0;
    for (size_t i = 0; i + 1 < row.view.size; ++i) {
      before_last += row.view.data[i].p;
    }
    EXPECT_LT(before_last, p);
    EXPECT_GE(before_last + row.view.data[row.view.size - 1].p, p);
  }
}

TEST(SamplingFiltersTest, MinPOnAnUnsortedListKeepsItsOrder) {
  // Keeps p >= 0.2 * max (0.1 here): 0.15, 0.5, 0.3 in their row order.
  Row row(LogitsOf({0.15, 0.5, 0.05, 0.3}));
  MakeMinP(0.2f, 0)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), ElementsAre(0, 1, 3));
  EXPECT_FALSE(row.view.sorted);
}

TEST(SamplingFiltersTest, MinPFallsBackToSortingForMinKeep) {
  // Only token 1 clears 0.9 * max; min_keep 2 keeps the two best, sorted.
  Row row(LogitsOf({0.15, 0.5, 0.05, 0.3}));
  MakeMinP(0.9f, 2)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), ElementsAre(1, 3));
  EXPECT_TRUE(row.view.sorted);
  // A sorted list is cut where the logits fall below max + log(p).
  Row sorted(LogitsOf(kProbs));
  MakeTopK(4)->Apply(&sorted.view);
  MakeMinP(0.5f, 0)->Apply(&sorted.view);
  EXPECT_THAT(Ids(sorted.view), ElementsAre(0, 1));
}

TEST(SamplingFiltersTest, TypicalCanDropTheMostLikelyToken) {
  // Entropy 1.505 nats: the 0.15 tokens (surprise 1.90) are more typical
  // than the 0.4 one (0.92); the first four typical ones pass 0.5 of mass.
  Row row(LogitsOf({0.4, 0.15, 0.15, 0.15, 0.15}));
  MakeTypical(0.5f, 0)->Apply(&row.view);
  EXPECT_THAT(Ids(row.view), UnorderedElementsAre(1, 2, 3, 4));
  EXPECT_FALSE(row.view.sorted);
  // Where the top token is the typical one, it goes first.
  Row peaked(LogitsOf({0.6, 0.1, 0.1, 0.1, 0.1}));
  MakeTypical(0.5f, 0)->Apply(&peaked.view);
  EXPECT_THAT(Ids(peaked.view), ElementsAre(0));
  // min_keep counts too.
  Row keep(LogitsOf({0.6, 0.1, 0.1, 0.1, 0.1}));
  MakeTypical(0.5f, 3)->Apply(&keep.view);
  EXPECT_EQ(keep.view.size, 3u);
}

TEST(SamplingFiltersTest, TopNSigmaMasksBelowMaxMinusNSigmaWithoutSorting) {
  // Finite logits 10, 9, 1, 0: mean 5, sigma sqrt(82 / 4) = 4.53, so one
  // sigma keeps logits >= 5.47.
  Row row({1.0f, 10.0f, -kInf, 9.0f, 0.0f});
  MakeTopNSigma(1.0f)->Apply(&row.view);
  EXPECT_EQ(row.view.size, 5u);  // masked, not removed
  EXPECT_FALSE(row.view.sorted);
  EXPECT_EQ(row.data[0].logit, -kInf);
  EXPECT_EQ(row.data[1].logit, 10.0f);
  EXPECT_EQ(row.data[3].logit, 9.0f);
  EXPECT_EQ(row.data[4].logit, -kInf);
  Row wide({1.0f, 10.0f, -kInf, 9.0f, 0.0f});
  MakeTopNSigma(2.5f)->Apply(&wide.view);  // 10 - 11.3 < 0: all finite stay
  EXPECT_EQ(wide.data[4].logit, 0.0f);
}

TEST(SamplingFiltersTest, TemperatureScalesAndZeroKeepsTheFirstMax) {
  Row row({2.0f, -1.0f, 4.0f});
  MakeTemperature(0.5f)->Apply(&row.view);
  EXPECT_THAT(std::vector<float>(
                  {row.data[0].logit, row.data[1].logit, row.data[2].logit}),
              ElementsAre(4.0f, -2.0f, 8.0f));
  Row greedy({2.0f, 5.0f, 1.0f, 5.0f});
  MakeTemperature(0.0f)->Apply(&greedy.view);
  EXPECT_EQ(greedy.view.size, 4u);
  EXPECT_EQ(greedy.data[1].logit, 5.0f);  // the first of the two maxima
  EXPECT_EQ(greedy.data[0].logit, -kInf);
  EXPECT_EQ(greedy.data[2].logit, -kInf);
  EXPECT_EQ(greedy.data[3].logit, -kInf);
  Row negative({2.0f, 3.0f});
  MakeTemperatureExt(-1.0f, 0.0f, 1.0f)->Apply(&negative.view);
  EXPECT_EQ(negative.data[0].logit, -kInf);  // < 0 acts as 0
}

TEST(SamplingFiltersTest, DynamicTemperatureFollowsTheEntropy) {
  // A flat distribution has the maximum entropy: temperature + range.
  Row flat({1.0f, 1.0f, 1.0f, 1.0f});
  MakeTemperatureExt(1.0f, 0.5f, 1.0f)->Apply(&flat.view);
  EXPECT_FLOAT_EQ(flat.data[0].logit, 1.0f / 1.5f);
  EXPECT_NEAR(SumOfP(flat.view), 1.0f, 1e-6);
  // A near-certain one has almost none: close to temperature - range.
  Row peaked({30.0f, 0.0f, 0.0f, 0.0f});
  MakeTemperatureExt(1.0f, 0.5f, 1.0f)->Apply(&peaked.view);
  EXPECT_NEAR(peaked.data[0].logit, 30.0f / 0.5f, 0.01f);
  EXPECT_TRUE(peaked.view.sorted);
}

TEST(SamplingFiltersTest, LogitBiasAddsBansAndIgnoresUnknownIds) {
  Row row({1.0f, 2.0f, 3.0f});
  MakeLogitBias({{0, 2.5f}, {2, -kInf}, {0, 1.0f}, {7, 5.0f}})
      ->Apply(&row.view);
  EXPECT_EQ(row.data[0].logit, 4.5f);  // both entries, in order
  EXPECT_EQ(row.data[1].logit, 2.0f);
  EXPECT_EQ(row.data[2].logit, -kInf);
  // Ids away from their index (a reordered list) are searched.
  Row moved({1.0f, 2.0f, 3.0f});
  std::reverse(moved.data.begin(), moved.data.end());
  MakeLogitBias({{0, 10.0f}})->Apply(&moved.view);
  EXPECT_EQ(moved.data[2].id, 0);
  EXPECT_EQ(moved.data[2].logit, 11.0f);
}

TEST(SamplingCandidatesTest, SoftmaxSortsOnlyWhenAsked) {
  Row row({0.0f, 2.0f, 1.0f});
  Softmax(&row.view, false);
  EXPECT_THAT(Ids(row.view), ElementsAre(0, 1, 2));
  EXPECT_NEAR(SumOfP(row.view), 1.0f, 1e-6);
  EXPECT_GT(row.data[1].p, row.data[2].p);
  Softmax(&row.view, true);
  EXPECT_THAT(Ids(row.view), ElementsAre(1, 2, 0));
  EXPECT_TRUE(row.view.sorted);
}

TEST(SamplingCandidatesTest, BucketSortOrdersTheBestAcrossBuckets) {
  // Logits spread over and beyond the [-10, 10) bucket range, -inf too.
  std::vector<float> logits = {-kInf, 50.0f, 9.99f, -30.0f, 0.0f};
  for (int i = 0; i < 300; ++i) logits.push_back(-10.0f + 0.07f * i);
  Row row(logits);
  std::vector<Candidate> out;
  BucketPartialSort(row.view, 200, &out);
  ASSERT_GE(out.size(), 200u);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (size_t i = 0; i < 200; ++i) EXPECT_EQ(out[i].logit, sorted[i]) << i;
  PartialSortInPlace(&row.view, row.view.size);  // everything, -inf last
  EXPECT_EQ(row.view.data[row.view.size - 1].logit, -kInf);
  EXPECT_EQ(row.view.data[0].logit, 50.0f);
}

TEST(SamplingCandidatesTest, TruncateToIntIsTotal) {
  EXPECT_EQ(TruncateToInt(3.9f), 3);
  EXPECT_EQ(TruncateToInt(-3.9f), -3);
  EXPECT_EQ(TruncateToInt(kInf), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(TruncateToInt(std::nanf("")), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(TruncateToInt(3e9f), std::numeric_limits<int32_t>::min());
}

}  // namespace
}  // namespace kvault::sampling
