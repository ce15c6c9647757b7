// Concurrent requests on any slot while another thread saves, restores and
// erases slots in a bounded loop: every request completes with the tokens
// of a solo run (greedy), whatever the slot actions did to the slots, with
// a roomy pool and with a pool so tight that slots spill and requests are
// preempted.
#include <string>
#include <thread>
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

struct StressCase {
  const char* name;
  uint32_t n_ctx_total;
};

class EngineStressTest : public ::testing::TestWithParam<StressCase> {};

// True for the errors the action loop may legitimately meet.
bool Expected(const Status& status) {
  return status.ok() || status.reason() == "slot_empty" ||
         status.reason() == "file_not_found" || status.reason() == "no_room";
}

TEST_P(EngineStressTest, RequestsAndSlotActionsInterleave) {
  auto reference = MakeGenModel(4);
  EngineOptions options;
  options.n_ctx_total = GetParam().n_ctx_total;
  options.n_slots = 4;
  options.ctx_per_slot = 96;
  options.num_threads = 1;
  options.prefill_chunk = 8;
  options.spill_ram_bytes = 64 << 20;
  options.sync_saves = false;
  auto engine = Engine::Create(MakeGenModel(4), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string dir = engine_test::TempDir(GetParam().name);

  constexpr int kNumRequests = 16;
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::thread actions([&] {
    for (int i = 0; i < 30; ++i) {
      const uint32_t s = i % 4;
      const std::string file = dir + "/f" + std::to_string(i % 3);
      Status saved = (*engine)->SaveSlot(s, file).status();
      EXPECT_TRUE(Expected(saved)) << saved;
      Status restored =
          (*engine)->RestoreSlot((s + 1) % 4, dir + "/f" +
                                 std::to_string((i + 1) % 3)).status();
      EXPECT_TRUE(Expected(restored)) << restored;
      if (i % 5 == 0) {
        Status erased = (*engine)->EraseSlot((s + 2) % 4).status();
        EXPECT_TRUE(erased.ok()) << erased;
      }
    }
  });
  for (int i = 0; i < kNumRequests; ++i) {
    // Prompts share prefixes so slots are reused with cache_prompt.
    std::vector<TokenId> prompt = GenPrompt(8, i % 3);
    const std::vector<TokenId> tail = GenPrompt(4 + i % 5, 20 + i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    prompts.push_back(prompt);
    CompletionParams p = engine_test::Greedy(prompt, 12 + i % 7);
    p.ignore_eos = true;
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE((*engine)->Submit(p, sinks.back()).ok());
  }
  for (int i = 0; i < kNumRequests; ++i) {
    SCOPED_TRACE(i);
    auto result = sinks[i]->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens,
              SoloGreedy(*reference, prompts[i], 12 + i % 7, false));
  }
  actions.join();
  EXPECT_EQ((*engine)->Metrics().requests_failed, 0u);
}

INSTANTIATE_TEST_SUITE_P(Pools, EngineStressTest,
                         ::testing::Values(StressCase{"roomy", 1024},
                                           StressCase{"tight", 96}),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace kvault
