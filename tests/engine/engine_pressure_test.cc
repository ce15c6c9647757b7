// Pool pressure: when the generating requests together outgrow the pool,
// the youngest is preempted (spilled, or dropped and recomputed without a
// tier) and resumed later; every request still ends with the tokens of an
// undisturbed solo run.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

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
  KvPolicy kv_policy;
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
  // Without a tier, finished requests' idle KV must be dropped for the
  // queued ones: the opt-in policy (refuse is tested below).
  if (c.spill_ram_bytes == 0) options.on_kv_full = OnKvFull::kDropLru;
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
    EXPECT_EQ(result->tokens,
              SoloGreedy(*reference, prompts[i], kPredict, false));
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

// A request for an idle slot whose KV was spilled, arriving while another
// slot's running request holds the pool, waits for that request to end and
// then brings the KV back: it reuses the whole cached prefix instead of
// recomputing it.
TEST(EnginePressureWaitTest, SpilledSlotWaitsForRoomInsteadOfRecomputing) {
  auto reference = MakeGenModel(5);
  EngineOptions options;
  options.n_ctx_total = 64;  // 4 pages of 16
  options.page_size = 16;
  options.n_slots = 2;
  options.ctx_per_slot = 64;
  options.num_threads = 1;
  options.spill_ram_bytes = 16 << 20;
  auto engine = Engine::Create(MakeGenModel(5), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<TokenId> first_prompt = GenPrompt(20, 7);
  CompletionParams first = engine_test::Greedy(first_prompt, 10, 0);
  first.ignore_eos = true;
  auto first_result = engine_test::RunToEnd(engine->get(), first);
  ASSERT_TRUE(first_result.ok()) << first_result.status();
  const uint64_t cached = (*engine)->Slots()[0].n_cached;
  ASSERT_GE(cached, 20u);
  // Slot 1 grows to 3 and then 4 pages, which spills idle slot 0 (2 pages).
  auto hog = std::make_shared<RecordingSink>();
  std::mutex mu;
  std::condition_variable cv;
  bool hog_big = false;
  hog->OnEachToken([&](size_t n) {
    if (n != 25) return;  // 10 + 25 cells: slot 1 holds 3 of the 4 pages
    std::lock_guard<std::mutex> lock(mu);
    hog_big = true;
    cv.notify_all();
  });
  CompletionParams hog_params = engine_test::Greedy(GenPrompt(10, 8), 45, 1);
  hog_params.ignore_eos = true;
  ASSERT_TRUE((*engine)->Submit(hog_params, hog).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return hog_big; });
  }
  const std::vector<TokenId> prompt = engine_test::Concat(
      engine_test::Concat(first_prompt, first_result->tokens), GenPrompt(4, 9));
  auto again =
      engine_test::RunToEnd(engine->get(), engine_test::Greedy(prompt, 8, 0));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->timings.cache_n, cached);  // nothing recomputed
  EXPECT_EQ(again->tokens, SoloGreedy(*reference, prompt, 8, false));
  ASSERT_TRUE(hog->Wait().ok());
  const EngineMetrics m = (*engine)->Metrics();
  EXPECT_GT(m.vault.evictions, 0u);
  EXPECT_GT(m.vault.restores_ok, 0u);
}

// The pool (4 pages) holds an idle slot's 3 pages; no tier can take them;
// a request on the other slot needs 3 pages.
EngineOptions FullPoolOptions(OnKvFull policy) {
  EngineOptions options;
  options.n_ctx_total = 64;
  options.page_size = 16;
  options.n_slots = 2;
  options.ctx_per_slot = 64;
  options.num_threads = 1;
  options.prefill_chunk = 16;
  options.spill_ram_bytes = 0;
  options.on_kv_full = policy;
  return options;
}

// Regression (issue 17): the idle KV was discarded with only a log line.
// By default the request needing room is refused and says why.
TEST(EngineKvFullTest, RefuseKeepsIdleKvAndFailsTheRequestWithKvFull) {
  auto engine =
      Engine::Create(MakeGenModel(3), FullPoolOptions(OnKvFull::kRefuse));
  ASSERT_TRUE(engine.ok()) << engine.status();
  CompletionParams first = engine_test::Greedy(GenPrompt(40, 1), 4, 0);
  first.ignore_eos = true;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), first).ok());
  const uint64_t cached = (*engine)->Slots()[0].n_cached;
  ASSERT_GE(cached, 40u);
  CompletionParams second = engine_test::Greedy(GenPrompt(40, 2), 4, 1);
  second.ignore_eos = true;
  auto refused = engine_test::RunToEnd(engine->get(), second);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().reason(), kReasonKvFull) << refused.status();
  EXPECT_NE(refused.status().message().find("--on-kv-full refuse"),
            std::string_view::npos)
      << refused.status();
  const SlotInfo slot0 = (*engine)->Slots()[0];
  EXPECT_EQ(slot0.n_cached, cached);
  EXPECT_EQ(slot0.n_kv_dropped, 0u);
  const EngineMetrics m = (*engine)->Metrics();
  EXPECT_EQ(m.idle_kv_discards, 0u);
  EXPECT_GE(m.kv_full_refusals, 1u);
}

TEST(EngineKvFullTest, DropLruDropsTheIdleKvCountedAndMarked) {
  auto engine =
      Engine::Create(MakeGenModel(3), FullPoolOptions(OnKvFull::kDropLru));
  ASSERT_TRUE(engine.ok()) << engine.status();
  CompletionParams first = engine_test::Greedy(GenPrompt(40, 1), 4, 0);
  first.ignore_eos = true;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), first).ok());
  const uint64_t cached = (*engine)->Slots()[0].n_cached;
  CompletionParams second = engine_test::Greedy(GenPrompt(40, 2), 4, 1);
  second.ignore_eos = true;
  auto done = engine_test::RunToEnd(engine->get(), second);
  ASSERT_TRUE(done.ok()) << done.status();
  const SlotInfo slot0 = (*engine)->Slots()[0];
  EXPECT_EQ(slot0.n_cached, 0u);
  EXPECT_EQ(slot0.n_kv_dropped, cached);
  const EngineMetrics m = (*engine)->Metrics();
  EXPECT_EQ(m.idle_kv_discards, 1u);
  EXPECT_EQ(m.idle_kv_discarded_tokens, cached);
}

// Regression (issue 17): restoring into a slot needed room for its old and
// new contents at once. The target's own pages now count (its old KV is
// spilled, so a failed restore would still leave it).
TEST(EngineKvFullTest, RestoreReusesTheTargetSlotsOwnPages) {
  EngineOptions options = FullPoolOptions(OnKvFull::kRefuse);
  options.spill_ram_bytes = 16 << 20;
  auto engine = Engine::Create(MakeGenModel(3), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string path = engine_test::TempDir("own_pages") + "/big.bin";
  CompletionParams big = engine_test::Greedy(GenPrompt(40, 1), 4, 0);
  big.ignore_eos = true;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), big).ok());
  auto saved = (*engine)->SaveSlot(0, path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_GT(saved->n_saved, 32u);  // 3 pages
  CompletionParams other = engine_test::Greedy(GenPrompt(35, 2), 4, 0);
  other.ignore_eos = true;
  other.cache_prompt = false;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), other).ok());
  // Slot 0 holds 3 of 4 pages; the file needs 3: only its own pages fit.
  auto restored = (*engine)->RestoreSlot(0, path);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, saved->n_saved);
  EXPECT_EQ((*engine)->Slots()[0].n_cached, saved->n_saved);
  EXPECT_FALSE((*engine)->Slots()[0].spilled);
}

// Flips one bit in the middle of the file at `path`.
void CorruptCopy(const std::string& path, const std::string& copy) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 0u);
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(copy, std::ios::binary) << bytes;
}

// Regression (issue 17, fault 6): with no spill tier the target's old KV
// could go nowhere, so a restore into a full slot got no_room. Now the file
// is verified whole and replaces the slot's KV in its own pages; a bad file
// still leaves the slot as it was.
TEST(EngineKvFullTest, RestoreWithoutAnyTierReusesTheSlotsPages) {
  auto reference = MakeGenModel(3);
  auto engine =
      Engine::Create(MakeGenModel(3), FullPoolOptions(OnKvFull::kRefuse));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string dir = engine_test::TempDir("own_pages_no_tier");
  const std::vector<TokenId> prompt = GenPrompt(40, 1);
  CompletionParams story = engine_test::Greedy(prompt, 4, 0);
  story.ignore_eos = true;
  auto told = engine_test::RunToEnd(engine->get(), story);
  ASSERT_TRUE(told.ok()) << told.status();
  auto saved = (*engine)->SaveSlot(0, dir + "/story.bin");
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_GT(saved->n_saved, 32u);  // 3 of the 4 pages
  const std::vector<TokenId> history =
      engine_test::Concat(prompt, told->tokens);
  const std::vector<TokenId> expected =
      SoloGreedy(*reference, history, 8, false);
  // Another conversation fills slot 0's 3 pages; 1 page is free.
  CompletionParams other = engine_test::Greedy(GenPrompt(35, 2), 4, 0);
  other.ignore_eos = true;
  other.cache_prompt = false;
  ASSERT_TRUE(engine_test::RunToEnd(engine->get(), other).ok());
  const uint64_t other_cached = (*engine)->Slots()[0].n_cached;

  CorruptCopy(dir + "/story.bin", dir + "/bad.bin");
  auto bad = (*engine)->RestoreSlot(0, dir + "/bad.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), kReasonChecksumMismatch) << bad.status();
  EXPECT_EQ((*engine)->Slots()[0].n_cached, other_cached);

  auto restored = (*engine)->RestoreSlot(0, dir + "/story.bin");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, saved->n_saved);
  EXPECT_EQ((*engine)->Slots()[0].n_cached, saved->n_saved);
  CompletionParams next = engine_test::Greedy(history, 8, 0);
  next.ignore_eos = true;
  auto continued = engine_test::RunToEnd(engine->get(), next);
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_EQ(continued->tokens, expected);
  // The restored KV was used, not recomputed.
  EXPECT_GE(continued->timings.cache_n, saved->n_saved - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Tiers, EnginePressureTest,
    ::testing::Values(PressureCase{"ram_tier", 16 << 20, KvPolicy::kPaged},
                      PressureCase{"no_tier", 0, KvPolicy::kPaged},
                      PressureCase{"contiguous", 16 << 20,
                                   KvPolicy::kContiguous}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvault
