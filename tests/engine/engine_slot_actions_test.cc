// Slot save/restore/erase through the engine: a saved conversation
// continues identically in another slot, every restore error keeps its
// reason and leaves the slot as it was, and a restore into a full pool
// spills an idle slot that later continues exactly as before.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace kvault {
namespace {

using engine_test::Concat;
using engine_test::GenPrompt;
using engine_test::Greedy;
using engine_test::MakeGenModel;
using engine_test::RunToEnd;
using engine_test::SoloGreedy;
using engine_test::TempDir;

std::unique_ptr<Engine> StartEngine(std::unique_ptr<LlamaModel> model,
                                    const EngineOptions& options) {
  auto engine = Engine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

EngineOptions SmallOptions(uint32_t n_slots) {
  EngineOptions o;
  o.n_ctx_total = 1024;
  o.n_slots = n_slots;
  o.ctx_per_slot = 256;
  o.num_threads = 1;
  o.prefill_chunk = 16;
  o.sync_saves = false;
  return o;
}

// A greedy request that ignores end-of-generation (random models).
CompletionParams Fixed(std::vector<TokenId> prompt, int32_t n, uint32_t slot) {
  CompletionParams p = Greedy(std::move(prompt), n, slot);
  p.ignore_eos = true;
  return p;
}

void CopyFile(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to,
                             std::filesystem::copy_options::overwrite_existing);
}

TEST(EngineSlotActionsTest, SaveThenRestoreIntoAnotherSlotContinuesAlike) {
  auto reference = engine_test::LoadStories();
  if (reference == nullptr) GTEST_SKIP() << engine_test::StoriesPath() << " missing";
  EngineOptions options = SmallOptions(2);
  options.ctx_per_slot = 512;
  auto engine = StartEngine(engine_test::LoadStories(), options);
  const std::string dir = TempDir("save_restore");
  const std::vector<TokenId> prompt =
      reference->tokenizer().Tokenize("Once upon a time, a girl", true, false);
  auto first = RunToEnd(engine.get(), Greedy(prompt, 16, 1));
  ASSERT_TRUE(first.ok()) << first.status();

  auto saved = engine->SaveSlot(1, dir + "/slot1.bin");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->n_saved, first->tokens_cached);
  EXPECT_EQ(saved->n_saved, engine->Slots()[1].n_cached);
  EXPECT_EQ(saved->n_written, std::filesystem::file_size(dir + "/slot1.bin"));
  auto restored = engine->RestoreSlot(0, dir + "/slot1.bin");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, saved->n_saved);
  EXPECT_EQ(restored->n_read, saved->n_written);
  EXPECT_EQ(engine->Slots()[0].n_cached, saved->n_saved);

  const std::vector<TokenId> next = Concat(
      Concat(prompt, first->tokens),
      reference->tokenizer().Tokenize(" The", false, false));
  auto in0 = RunToEnd(engine.get(), Greedy(next, 12, 0));
  auto in1 = RunToEnd(engine.get(), Greedy(next, 12, 1));
  ASSERT_TRUE(in0.ok()) << in0.status();
  ASSERT_TRUE(in1.ok()) << in1.status();
  EXPECT_EQ(in0->timings.cache_n, saved->n_saved);  // no recompute
  EXPECT_EQ(in1->timings.cache_n, saved->n_saved);
  EXPECT_EQ(in0->tokens, in1->tokens);
  EXPECT_EQ(in0->tokens, SoloGreedy(*reference, next, 12, true));
  EXPECT_EQ(engine->Metrics().restores_ok, 1u);
  EXPECT_EQ(engine->Metrics().saves_ok, 1u);
}

TEST(EngineSlotActionsTest, RestoreErrorsKeepTheirReasonAndTheSlot) {
  auto reference = MakeGenModel(1);
  auto engine = StartEngine(MakeGenModel(1), SmallOptions(3));
  auto foreign = StartEngine(MakeGenModel(2), SmallOptions(1));
  const std::string dir = TempDir("restore_errors");
  ASSERT_TRUE(RunToEnd(engine.get(), Fixed(GenPrompt(30, 1), 8, 1)).ok());
  ASSERT_TRUE(engine->SaveSlot(1, dir + "/good.bin").ok());
  ASSERT_TRUE(RunToEnd(foreign.get(), Fixed(GenPrompt(30, 1), 8, 0)).ok());
  ASSERT_TRUE(foreign->SaveSlot(0, dir + "/foreign.bin").ok());

  const std::vector<TokenId> prompt = GenPrompt(20, 2);
  auto before = RunToEnd(engine.get(), Fixed(prompt, 6, 0));
  ASSERT_TRUE(before.ok()) << before.status();
  const uint64_t n_cached = engine->Slots()[0].n_cached;
  ASSERT_EQ(n_cached, prompt.size() + 5);

  CopyFile(dir + "/good.bin", dir + "/corrupt.bin");
  {
    std::fstream f(dir + "/corrupt.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(dir + "/corrupt.bin");
    f.seekg(size / 2);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(size / 2);
    f.write(&c, 1);
  }
  CopyFile(dir + "/good.bin", dir + "/truncated.bin");
  std::filesystem::resize_file(
      dir + "/truncated.bin", std::filesystem::file_size(dir + "/good.bin") - 100);

  struct Case {
    std::string file;
    StatusCode code;
    std::string reason;  // "" : any non-empty reason
  };
  const std::vector<Case> cases = {
      {"missing.bin", StatusCode::kNotFound, "file_not_found"},
      {"corrupt.bin", StatusCode::kCorruption, ""},
      {"foreign.bin", StatusCode::kInvalidArgument, "model_mismatch"},
      {"truncated.bin", StatusCode::kCorruption, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto r = engine->RestoreSlot(0, dir + "/" + c.file);
    ASSERT_FALSE(r.ok());
    if (c.code != StatusCode::kInvalidArgument) {
      EXPECT_EQ(r.status().code(), c.code) << r.status();
    }
    if (c.reason.empty()) {
      EXPECT_FALSE(r.status().reason().empty()) << r.status();
    } else {
      EXPECT_EQ(r.status().reason(), c.reason) << r.status();
    }
    EXPECT_EQ(engine->Slots()[0].n_cached, n_cached);
  }
  const EngineMetrics m = engine->Metrics();
  EXPECT_EQ(m.restores_not_found, 1u);
  EXPECT_EQ(m.restores_mismatch, 1u);
  EXPECT_EQ(m.restores_corrupt + m.restores_other_error, 2u);
  EXPECT_EQ(m.restores_ok, 0u);

  // The slot answers as before: its whole KV is reused, the output is a
  // cold run's.
  const std::vector<TokenId> next =
      Concat(Concat(prompt, before->tokens), GenPrompt(4, 3));
  auto after = RunToEnd(engine.get(), Fixed(next, 6, 0));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->timings.cache_n, n_cached);
  EXPECT_EQ(after->tokens, SoloGreedy(*reference, next, 6, false));

  auto empty = engine->SaveSlot(2, dir + "/empty.bin");
  EXPECT_EQ(empty.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(empty.status().reason(), "slot_empty");
  auto erased = engine->EraseSlot(1);
  ASSERT_TRUE(erased.ok()) << erased.status();
  EXPECT_EQ(*erased, 37u);
  EXPECT_EQ(engine->Slots()[1].n_cached, 0u);
  EXPECT_EQ(engine->SaveSlot(1, dir + "/x.bin").status().reason(), "slot_empty");
}

TEST(EngineSlotActionsTest, RestoreIntoFullPoolSpillsAnIdleSlot) {
  auto reference = MakeGenModel(1);
  EngineOptions options = SmallOptions(3);
  options.n_ctx_total = 128;  // 8 pages of 16
  options.ctx_per_slot = 128;
  options.spill_ram_bytes = 64 << 20;
  auto engine = StartEngine(MakeGenModel(1), options);
  const std::string dir = TempDir("full_pool");
  const std::vector<TokenId> p0 = GenPrompt(40, 4);
  auto r0 = RunToEnd(engine.get(), Fixed(p0, 8, 0));  // 47 cells: 3 pages
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = RunToEnd(engine.get(), Fixed(GenPrompt(50, 5), 8, 1));  // 4 pages
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(engine->SaveSlot(1, dir + "/s1.bin").ok());
  EXPECT_EQ(engine->Metrics().pool.free_cells, 16u);

  auto restored = engine->RestoreSlot(2, dir + "/s1.bin");
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->evicted.size(), 1u);
  EXPECT_EQ(restored->evicted[0].seq, SeqId(0));
  EXPECT_EQ(restored->evicted[0].tier, "ram");
  const SlotInfo spilled = engine->Slots()[0];
  EXPECT_TRUE(spilled.spilled);
  EXPECT_EQ(spilled.state, "spilled");
  EXPECT_EQ(spilled.n_cached, 47u);
  // The spilled slot still saves (the vault copies its tier entry).
  ASSERT_TRUE(engine->SaveSlot(0, dir + "/s0.bin").ok());

  const std::vector<TokenId> next =
      Concat(Concat(p0, r0->tokens), GenPrompt(5, 6));
  auto more = RunToEnd(engine.get(), Fixed(next, 8, 0));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->timings.cache_n, 47u);  // brought back, not recomputed
  EXPECT_EQ(more->tokens, SoloGreedy(*reference, next, 8, false));
  EXPECT_FALSE(engine->Slots()[0].spilled);
  EXPECT_GE(engine->Metrics().vault.evictions, 2u);
}

TEST(EngineSlotActionsTest, KvMapAndDefrag) {
  EngineOptions options = SmallOptions(2);
  options.n_ctx_total = 256;
  auto engine = StartEngine(MakeGenModel(1), options);
  ASSERT_TRUE(RunToEnd(engine.get(), Fixed(GenPrompt(20, 7), 13, 0)).ok());
  ASSERT_TRUE(RunToEnd(engine.get(), Fixed(GenPrompt(40, 8), 9, 1)).ok());
  const KvMap map = engine->GetKvMap();
  EXPECT_EQ(map.page_size, 16u);
  ASSERT_EQ(map.page_slot.size(), 16u);
  int pages[2] = {0, 0};
  for (const auto& owner : map.page_slot) {
    if (owner) ++pages[*owner];
  }
  EXPECT_EQ(pages[0], 2);  // 32 cells
  EXPECT_EQ(pages[1], 3);  // 48 cells
  EXPECT_EQ(map.stats.used_cells, 80u);
  auto report = engine->Defrag();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(engine->GetKvMap().stats.num_free_runs, 1u);
  EXPECT_EQ(engine->Slots()[1].n_cached, 48u);
}

TEST(EngineSlotActionsTest, RestoreWithoutRoomIsNoRoomAndKeepsOthers) {
  const std::string dir = TempDir("no_room");
  EngineOptions big = SmallOptions(1);
  auto source = StartEngine(MakeGenModel(1), big);
  ASSERT_TRUE(RunToEnd(source.get(), Fixed(GenPrompt(50, 5), 8, 0)).ok());
  ASSERT_TRUE(source->SaveSlot(0, dir + "/s.bin").ok());  // 57 tokens

  EngineOptions small = SmallOptions(2);
  small.n_ctx_total = 64;  // 4 pages, no spill tier
  small.ctx_per_slot = 64;
  auto engine = StartEngine(MakeGenModel(1), small);
  ASSERT_TRUE(RunToEnd(engine.get(), Fixed(GenPrompt(15, 6), 6, 0)).ok());
  ASSERT_EQ(engine->Slots()[0].n_cached, 20u);  // 2 pages, not evictable
  auto r = engine->RestoreSlot(1, dir + "/s.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().reason(), "no_room");
  EXPECT_EQ(engine->Metrics().restores_no_room, 1u);
  EXPECT_EQ(engine->Slots()[0].n_cached, 20u);
  EXPECT_EQ(engine->Slots()[1].n_cached, 0u);
}

TEST(EngineSlotActionsTest, ContiguousDefragPolicySavesAndRestoresInline) {
  auto reference = MakeGenModel(1);
  EngineOptions options = SmallOptions(2);
  options.kv_policy = KvPolicy::kContiguousDefrag;
  auto engine = StartEngine(MakeGenModel(1), options);
  const std::string dir = TempDir("contiguous_defrag");
  const std::vector<TokenId> prompt = GenPrompt(25, 9);
  auto first = RunToEnd(engine.get(), Fixed(prompt, 7, 0));
  ASSERT_TRUE(first.ok()) << first.status();
  auto saved = engine->SaveSlot(0, dir + "/s.bin");
  ASSERT_TRUE(saved.ok()) << saved.status();
  auto restored = engine->RestoreSlot(1, dir + "/s.bin");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, 31u);
  const std::vector<TokenId> next =
      Concat(Concat(prompt, first->tokens), GenPrompt(3, 10));
  auto more = RunToEnd(engine.get(), Fixed(next, 5, 1));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->timings.cache_n, 31u);
  EXPECT_EQ(more->tokens, SoloGreedy(*reference, next, 5, false));
}

TEST(EngineSlotActionsTest, DiskTierSlotsSurviveARestart) {
  auto reference = MakeGenModel(1);
  const std::string spill = TempDir("restart");
  EngineOptions options = SmallOptions(2);
  options.n_ctx_total = 96;  // 6 pages
  options.ctx_per_slot = 96;
  options.spill_dir = spill;
  options.spill_disk_bytes = 64 << 20;
  const std::vector<TokenId> prompt = GenPrompt(40, 11);
  std::vector<TokenId> generated;
  {
    auto engine = StartEngine(MakeGenModel(1), options);
    auto r0 = RunToEnd(engine.get(), Fixed(prompt, 8, 0));  // 3 pages
    ASSERT_TRUE(r0.ok()) << r0.status();
    generated = r0->tokens;
    // Slot 1 needs 4 pages: slot 0 goes to disk.
    ASSERT_TRUE(RunToEnd(engine.get(), Fixed(GenPrompt(50, 12), 8, 1)).ok());
    EXPECT_TRUE(engine->Slots()[0].spilled);
  }
  auto engine = StartEngine(MakeGenModel(1), options);
  EXPECT_EQ(engine->Slots()[0].n_cached, 47u);
  EXPECT_EQ(engine->Slots()[1].n_cached, 0u);  // it was resident: gone
  const std::vector<TokenId> next =
      Concat(Concat(prompt, generated), GenPrompt(4, 13));
  auto more = RunToEnd(engine.get(), Fixed(next, 6, 0));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->timings.cache_n, 47u);
  EXPECT_EQ(more->tokens, SoloGreedy(*reference, next, 6, false));
}

}  // namespace
}  // namespace kvault
