// Pool pressure: when the generating requests together outgrow the pool,
// the youngest is preempted (spilled, or dropped and recomputed without a
// tier) and resumed later; every request still ends with the tokens of an
// undisturbed solo run.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace kvault {
namespace {

using engine_test::GenPrompt;
using engine_test::MakeGenModel;
using engine_test::RecordingSink;
using engine_test::SoloGreedy;

struct PressureCase {
  const char* name;
  uint64_t spill_ram_bytes;
  const char* kv_policy;
};

class EnginePressureTest : public ::testing::TestWithParam<PressureCase> {};

TEST_P(EnginePressureTest, EveryRequestCompletesAsIfAlone) {
  const PressureCase& c = GetParam();
  auto reference = MakeGenModel(3);
  EngineOptions options;
  options.n_ctx_total = 64;  // 4 pages; each request needs 3
  options.page_size = 16;
  options.n_slots = 3;
  options.ctx_per_slot = 64;
  options.num_threads = 1;
  options.prefill_chunk = 16;
  options.spill_ram_bytes = c.spill_ram_bytes;
  options.kv_policy = c.kv_policy;
  auto engine = Engine::Create(MakeGenModel(3), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  constexpr int kNumRequests = 5;
  constexpr int kPredict = 30;
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < kNumRequests; ++i) {
    prompts.push_back(GenPrompt(10, 10 + i));
    CompletionParams p = engine_test::Greedy(prompts.back(), kPredict);
    p.ignore_eos = true;
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE((*engine)->Submit(p, sinks.back()).ok());
  }
  for (int i = 0; i < kNumRequests; ++i) {
    SCOPED_TRACE(i);
    auto result = sinks[i]->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens, SoloGreedy(*reference, prompts[i], kPredict, false));
  }
  const EngineMetrics m = (*engine)->Metrics();
  EXPECT_GT(m.preemptions, 0u);
  if (c.spill_ram_bytes == 0) {
    // (A request preempted before its first chunk has nothing to drop.)
    EXPECT_GT(m.preemptions_recomputed, 0u);
    EXPECT_LE(m.preemptions_recomputed, m.preemptions);
  } else {
    EXPECT_EQ(m.preemptions_recomputed, 0u);
    EXPECT_GT(m.vault.evictions, 0u);
  }
  EXPECT_EQ(m.requests_failed, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Tiers, EnginePressureTest,
    ::testing::Values(PressureCase{"ram_tier", 16 << 20, "paged"},
                      PressureCase{"no_tier", 0, "paged"},
                      PressureCase{"contiguous", 16 << 20, "contiguous"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvault
