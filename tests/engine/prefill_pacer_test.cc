// The scheduler's chunking rule for prompts fed beside generating slots
// (engine/prefill_pacer.h): the chosen chunk's predicted time fits the
// allowance and one more token would not, the chunk shrinks with depth,
// and the costs come from the measured steps.
#include "engine/prefill_pacer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvault {
namespace {

constexpr double kTokenCells = 3000;
constexpr double kBaseNs = 6e6;  // a decode-only step: 6 ms

// A pacer that has seen decode-only steps of kBaseNs and one mixed step in
// which `units` of prefill took `prefill_ns` beyond the base.
PrefillPacer Learned(double share, double units, double prefill_ns) {
  PrefillPacer p(share, kTokenCells);
  p.Observe(kBaseNs, /*had_decode=*/true, 0);
  p.Observe(kBaseNs + prefill_ns, /*had_decode=*/true, units);
  return p;
}

TEST(PrefillPacerTest, UnitsCountMatmulsAndVisitedCells) {
  PrefillPacer p(0.5, kTokenCells);
  // 1 token at depth 100 visits 100 cells (+1 for itself is in depth's
  // convention: cells before it); 4 tokens visit d, d+1, d+2, d+3.
  EXPECT_DOUBLE_EQ(p.Units(1, 100), kTokenCells + 100);
  EXPECT_DOUBLE_EQ(p.Units(4, 100), 4 * kTokenCells + 100 + 101 + 102 + 103);
  EXPECT_DOUBLE_EQ(p.Units(0, 100), 0);
}

TEST(PrefillPacerTest, WithoutShareFeedsWholeChunks) {
  PrefillPacer p = Learned(0, 1e5, 1e7);
  double allowance = p.AllowanceNs();
  EXPECT_EQ(p.Take(2000, 256, &allowance), 256u);
}

TEST(PrefillPacerTest, ProbesWithFewTokensUntilCostsAreKnown) {
  PrefillPacer p(0.5, kTokenCells);
  double allowance = p.AllowanceNs();
  EXPECT_TRUE(std::isinf(allowance));  // no decode-only step measured yet
  EXPECT_EQ(p.Take(0, 256, &allowance), PrefillPacer::kProbeTokens);
  EXPECT_EQ(p.Take(0, 1, &allowance), 1u);
  p.Observe(kBaseNs, true, 0);
  allowance = p.AllowanceNs();
  EXPECT_DOUBLE_EQ(allowance, 0.5 * kBaseNs);
  // Base known, cost per unit not yet: still probing.
  EXPECT_EQ(p.Take(0, 256, &allowance), PrefillPacer::kProbeTokens);
}

TEST(PrefillPacerTest, ChunkIsTheLargestThatFitsTheAllowance) {
  // 8 tokens at depth 0 took 2 ms beyond the base step.
  PrefillPacer probe(0.5, kTokenCells);
  const double units = probe.Units(8, 0);
  const PrefillPacer p = Learned(0.5, units, 2e6);
  const double ns_per_unit = 2e6 / units;
  for (size_t depth : {0u, 100u, 1000u, 2048u, 8000u}) {
    double allowance = p.AllowanceNs();
    const size_t n = p.Take(depth, 512, &allowance);
    SCOPED_TRACE(testing::Message() << "depth " << depth << " n " << n);
    ASSERT_GE(n, 1u);
    if (n > 1) {
      EXPECT_LE(p.Units(n, depth) * ns_per_unit, 0.5 * kBaseNs + 1);
    }
    EXPECT_GT(p.Units(n + 1, depth) * ns_per_unit, 0.5 * kBaseNs - 1);
    EXPECT_NEAR(allowance, 0.5 * kBaseNs - p.Units(n, depth) * ns_per_unit,
                1);
  }
}

TEST(PrefillPacerTest, DeeperPromptsGetSmallerChunksButNeverNone) {
  const PrefillPacer p = Learned(0.5, 1e5, 1e6);
  size_t previous = std::numeric_limits<size_t>::max();
  for (size_t depth = 0; depth <= 1 << 20; depth = depth * 4 + 64) {
    double allowance = p.AllowanceNs();
    const size_t n = p.Take(depth, 512, &allowance);
    EXPECT_LE(n, previous) << "depth " << depth;
    EXPECT_GE(n, 1u) << "depth " << depth;
    previous = n;
  }
  EXPECT_EQ(previous, 1u);  // at a huge depth one token is all that fits
}

TEST(PrefillPacerTest, SlotsInOneStepShareTheAllowance) {
  const PrefillPacer p = Learned(0.5, 1e5, 1e6);
  double allowance = p.AllowanceNs();
  const size_t first = p.Take(500, 512, &allowance);
  const size_t second = p.Take(500, 512, &allowance);
  double fresh = p.AllowanceNs();
  EXPECT_EQ(first, p.Take(500, 512, &fresh));
  EXPECT_LT(second, first);
  EXPECT_GE(second, 1u);
}

TEST(PrefillPacerTest, MixedStepsChargeOnlyTimeBeyondTheBase) {
  // Same prefill work, measured once in a step that also decoded (base
  // subtracted) and once alone: the same cost per unit, the same chunk.
  PrefillPacer mixed(0.5, kTokenCells), alone(0.5, kTokenCells);
  for (PrefillPacer* p : {&mixed, &alone}) p->Observe(kBaseNs, true, 0);
  mixed.Observe(kBaseNs + 4e6, true, 2e5);
  alone.Observe(4e6, false, 2e5);
  double a = mixed.AllowanceNs(), b = alone.AllowanceNs();
  EXPECT_EQ(mixed.Take(300, 512, &a), alone.Take(300, 512, &b));
}

TEST(PrefillPacerTest, AnOddSlowStepDoesNotShrinkTheChunks) {
  // The same prefill work measured five times, once twice as slow (another
  // process had the core): the chunk is the one of the usual steps.
  PrefillPacer steady(0.5, kTokenCells), noisy(0.5, kTokenCells);
  for (PrefillPacer* p : {&steady, &noisy}) p->Observe(kBaseNs, true, 0);
  for (int i = 0; i < 5; ++i) {
    steady.Observe(kBaseNs + 2e6, true, 1e5);
    noisy.Observe(i == 2 ? 2 * (kBaseNs + 2e6) : kBaseNs + 2e6, true, 1e5);
  }
  double a = steady.AllowanceNs(), b = noisy.AllowanceNs();
  EXPECT_EQ(steady.Take(1000, 512, &a), noisy.Take(1000, 512, &b));
}

TEST(TokenCellsTest, RatioOfMatmulToAttentionWork) {
  // The small benchmark shape: 8 heads of 64, 2,949,120 weights per layer.
  EXPECT_DOUBLE_EQ(TokenCellsForShape(2949120, 8, 64, 64), 2880.0);
}

}  // namespace
}  // namespace kvault
