// The history stages: repetition penalties and DRY.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/sampling_stages.h"
#include "sampling_test_util.h"

namespace kvault::sampling {
namespace {

using ::testing::ElementsAre;

std::vector<float> LogitsAfter(Stage* stage, const std::vector<float>& logits) {
  Row row(logits);
  stage->Apply(&row.view);
  std::vector<float> out;
  for (const Candidate& c : row.data) out.push_back(c.logit);
  return out;
}

void AcceptAll(Stage* stage, const std::vector<TokenId>& tokens) {
  for (TokenId t : tokens) stage->Accept(t);
}

TEST(SamplingPenaltiesTest, NeutralSettingsBuildNoStage) {
  EXPECT_EQ(MakePenalties(64, 1.0f, 0.0f, 0.0f), nullptr);
  EXPECT_EQ(MakePenalties(0, 1.3f, 0.5f, 0.5f), nullptr);
  EXPECT_EQ(MakePenalties(-1, 1.3f, 0.0f, 0.0f), nullptr);  // clamped to 0
  EXPECT_NE(MakePenalties(64, 1.0f, 0.0f, 0.1f), nullptr);
}

TEST(SamplingPenaltiesTest, RepeatDividesPositiveAndMultipliesNegative) {
  auto stage = MakePenalties(8, 2.0f, 0.0f, 0.0f);
  AcceptAll(stage.get(), {0, 1, 1});
  EXPECT_THAT(LogitsAfter(stage.get(), {2.0f, -1.0f, 0.5f}),
              ElementsAre(1.0f, -2.0f, 0.5f));  // once per token, any count
}

TEST(SamplingPenaltiesTest, FrequencyCountsAndPresenceDoesNot) {
  auto stage = MakePenalties(8, 1.0f, 0.5f, 1.0f);
  AcceptAll(stage.get(), {0, 0, 0, 2});
  EXPECT_THAT(LogitsAfter(stage.get(), {1.0f, 1.0f, 1.0f}),
              ElementsAre(1.0f - 2.5f, 1.0f, 1.0f - 1.5f));
}

TEST(SamplingPenaltiesTest, OnlyTheLastNTokensCountAndResetForgets) {
  auto stage = MakePenalties(2, 1.0f, 1.0f, 0.0f);
  AcceptAll(stage.get(), {0, 0, 1, 2});  // 0 has left the window
  EXPECT_THAT(LogitsAfter(stage.get(), {0.0f, 0.0f, 0.0f}),
              ElementsAre(0.0f, -1.0f, -1.0f));
  stage->Reset();
  EXPECT_THAT(LogitsAfter(stage.get(), {0.0f, 0.0f, 0.0f}),
              ElementsAre(0.0f, 0.0f, 0.0f));
}

// Ten plain tokens "t0".."t9", "\n" as token 10, "a" 11 and "b" 12.
FakeVocab TestVocab() {
  std::vector<std::string> texts;
  for (int i = 0; i < 10; ++i) texts.push_back("t" + std::to_string(i));
  texts.push_back("\n");
  texts.push_back("a");
  texts.push_back("b");
  return FakeVocab(texts);
}

DryConfig Dry(int32_t allowed_length, float base = 2.0f) {
  DryConfig c;
  c.multiplier = 1.0f;
  c.base = base;
  c.allowed_length = allowed_length;
  c.penalty_last_n = 64;
  c.n_ctx_train = 1024;
  c.breakers = {"\n", "ab"};
  return c;
}

// Returns how much DRY lowered each of the 13 tokens' logits after
// `history`.
std::vector<float> DryPenalties(const DryConfig& config,
                                const SamplerVocab* vocab,
                                const std::vector<TokenId>& history) {
  auto stage = MakeDry(config, vocab);
  AcceptAll(stage.get(), history);
  std::vector<float> out = LogitsAfter(stage.get(), std::vector<float>(13));
  for (float& v : out) v = -v;
  return out;
}

TEST(SamplingDryTest, OffSettingsBuildNoStage) {
  const FakeVocab vocab = TestVocab();
  DryConfig c = Dry(2);
  c.multiplier = 0;
  EXPECT_EQ(MakeDry(c, &vocab), nullptr);
  c = Dry(2, 0.9f);  // base < 1
  EXPECT_EQ(MakeDry(c, &vocab), nullptr);
  c = Dry(2);
  c.penalty_last_n = 0;
  EXPECT_EQ(MakeDry(c, &vocab), nullptr);
}

TEST(SamplingDryTest, PenalizesTheTokenThatWouldExtendARepeat) {
  const FakeVocab vocab = TestVocab();
  // "1 2" repeats "1 2" that was followed by 3: 3 would extend a repeat of
  // length 2 = allowed_length, penalty 1 * 2^0.
  std::vector<float> p = DryPenalties(Dry(2), &vocab, {1, 2, 3, 1, 2});
  EXPECT_EQ(p[3], 1.0f);
  p[3] = 0;
  EXPECT_EQ(p, std::vector<float>(13, 0.0f));
  // A repeat of 3 past allowed_length 2: 2^1.
  p = DryPenalties(Dry(2), &vocab, {1, 2, 3, 4, 1, 2, 3});
  EXPECT_EQ(p[4], 2.0f);
  // Shorter than allowed_length: nothing.
  p = DryPenalties(Dry(3), &vocab, {1, 2, 3, 1, 2});
  EXPECT_EQ(p[3], 0.0f);
}

TEST(SamplingDryTest, OnlyTheLastNTokensAreSearched) {
  const FakeVocab vocab = TestVocab();
  DryConfig c = Dry(2);
  c.penalty_last_n = 4;  // "3 4 1 2": no earlier "1 2" in the window
  EXPECT_EQ(DryPenalties(c, &vocab, {1, 2, 3, 4, 1, 2})[3], 0.0f);
  c.penalty_last_n = 6;
  EXPECT_EQ(DryPenalties(c, &vocab, {1, 2, 3, 4, 1, 2})[3], 1.0f);
  c.n_ctx_train = 4;  // the training context caps the window too
  EXPECT_EQ(DryPenalties(c, &vocab, {1, 2, 3, 4, 1, 2})[3], 0.0f);
}

TEST(SamplingDryTest, ASingleTokenBreakerIsNeverPenalized) {
  const FakeVocab vocab = TestVocab();
  // "1 2" was followed by "\n" (10), a breaker on its own.
  EXPECT_EQ(DryPenalties(Dry(2), &vocab, {1, 2, 10, 1, 2})[10], 0.0f);
  // Without the vocabulary there are no breakers.
  EXPECT_EQ(DryPenalties(Dry(2), nullptr, {1, 2, 10, 1, 2})[10], 1.0f);
}

TEST(SamplingDryTest, ABreakerCapsTheRepeatLength) {
  const FakeVocab vocab = TestVocab();
  // "1 \n 2 3" repeats in full (4 tokens, then 4), but the last "\n" is 2
  // tokens back, so only 2 count: 2^(2 - 1) instead of 2^(4 - 1).
  const std::vector<TokenId> history = {1, 10, 2, 3, 4, 1, 10, 2, 3};
  EXPECT_EQ(DryPenalties(Dry(1), &vocab, history)[4], 2.0f);
  EXPECT_EQ(DryPenalties(Dry(1), nullptr, history)[4], 8.0f);
}

TEST(SamplingDryTest, AMultiTokenBreakerIsMatchedByItsTail) {
  const FakeVocab vocab = TestVocab();
  // "ab" is "a" (11) then "b" (12): "a b 2" repeats, then 4; the last
  // "a b" ends 1 token back, so the repeat counts 1, not 3.
  const std::vector<TokenId> history = {11, 12, 2, 4, 11, 12, 2};
  EXPECT_EQ(DryPenalties(Dry(1), &vocab, history)[4], 1.0f);
  EXPECT_EQ(DryPenalties(Dry(1), nullptr, history)[4], 4.0f);
  // "a" alone is no breaker: a token that merely starts one is penalized
  // like any other ("3" was followed by "a").
  EXPECT_EQ(DryPenalties(Dry(1), &vocab, {3, 11, 5, 3})[11], 1.0f);
}

TEST(SamplingDryTest, TheExponentIsCappedBelowFloatOverflow) {
  const FakeVocab vocab = TestVocab();
  std::vector<TokenId> history;
  for (int i = 0; i < 300; ++i) history.push_back(1 + i % 2);
  DryConfig c = Dry(0, 3.0f);
  c.penalty_last_n = 400;
  const std::vector<float> p = DryPenalties(c, &vocab, history);
  // log(FLT_MAX) / log(3) = 80: 3^80, finite.
  EXPECT_FLOAT_EQ(p[1], static_cast<float>(std::pow(3.0, 80)));
  EXPECT_TRUE(std::isfinite(p[1]));
}

TEST(SamplingDryTest, ResetForgetsTheHistory) {
  const FakeVocab vocab = TestVocab();
  auto stage = MakeDry(Dry(2), &vocab);
  AcceptAll(stage.get(), {1, 2, 3, 1, 2});
  stage->Reset();
  AcceptAll(stage.get(), {1, 2});
  EXPECT_EQ(LogitsAfter(stage.get(), std::vector<float>(13))[3], 0.0f);
}

}  // namespace
}  // namespace kvault::sampling
