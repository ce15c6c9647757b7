// Save -> restore -> continue for every architecture kvault runs, on the
// reference models of ../shared/models/arch: a conversation restored into
// another slot continues with the tokens an undisturbed run gives (the
// sliding-window models' windows are crossed on the way), and a file saved
// under one architecture is refused by another's engine as model_mismatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace kvault {
namespace {

using engine_test::Concat;
using engine_test::Greedy;
using engine_test::RunToEnd;
using engine_test::SoloGreedy;
using engine_test::TempDir;

std::string ArchModelPath(const std::string& name) {
  return std::string(KVAULT_SOURCE_DIR) + "/../shared/models/arch/" + name +
         ".q8_0.gguf";
}

std::unique_ptr<LlamaModel> LoadArchModel(const std::string& name) {
  auto model = LlamaModel::Load(ArchModelPath(name));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

std::unique_ptr<Engine> StartEngine(std::unique_ptr<LlamaModel> model) {
  EngineOptions o;
  o.n_ctx_total = 512;
  o.n_slots = 2;
  o.ctx_per_slot = 256;
  o.num_threads = 1;
  o.prefill_chunk = 8;  // several chunks, across the 16- and 24-token windows
  o.sync_saves = false;
  auto engine = Engine::Create(std::move(model), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// A greedy request that ignores end-of-generation (random models).
CompletionParams Fixed(std::vector<TokenId> prompt, int32_t n, uint32_t slot) {
  CompletionParams p = Greedy(std::move(prompt), n, slot);
  p.ignore_eos = true;
  return p;
}

class EngineArchRestoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ArchModelPath(GetParam()))) {
      GTEST_SKIP() << "missing " << ArchModelPath(GetParam());
    }
  }
};

TEST_P(EngineArchRestoreTest, RestoredConversationContinuesAsUndisturbed) {
  auto reference = LoadArchModel(GetParam());
  auto engine = StartEngine(LoadArchModel(GetParam()));
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(engine, nullptr);
  const std::string dir = TempDir("arch_restore_" + GetParam());
  const std::vector<TokenId> prompt = reference->tokenizer().Tokenize(
      "The little dog was sad because", true, false);
  auto first = RunToEnd(engine.get(), Fixed(prompt, 14, 1));
  ASSERT_TRUE(first.ok()) << first.status();
  auto saved = engine->SaveSlot(1, dir + "/slot.bin");
  ASSERT_TRUE(saved.ok()) << saved.status();
  auto restored = engine->RestoreSlot(0, dir + "/slot.bin");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->n_restored, saved->n_saved);

  const std::vector<TokenId> next =
      Concat(Concat(prompt, first->tokens),
             reference->tokenizer().Tokenize(" and then", false, false));
  auto in0 = RunToEnd(engine.get(), Fixed(next, 12, 0));
  ASSERT_TRUE(in0.ok()) << in0.status();
  EXPECT_EQ(in0->timings.cache_n, saved->n_saved);  // continued, not redone
  EXPECT_GT(next.size() + 12, 24u);                 // past every window
  EXPECT_EQ(in0->tokens, SoloGreedy(*reference, next, 12, false));
}

INSTANTIATE_TEST_SUITE_P(Arch, EngineArchRestoreTest,
                         ::testing::Values("llama31", "qwen2", "qwen3", "phi3",
                                           "gemma2", "gemma3", "mixtral",
                                           "qwen3moe"));

TEST(EngineArchRestoreMismatchTest, AnotherArchitecturesFileIsRefused) {
  if (!std::filesystem::exists(ArchModelPath("qwen2")) ||
      !std::filesystem::exists(ArchModelPath("gemma2"))) {
    GTEST_SKIP() << "missing ../shared/models/arch";
  }
  auto qwen2 = StartEngine(LoadArchModel("qwen2"));
  auto gemma2 = StartEngine(LoadArchModel("gemma2"));
  ASSERT_NE(qwen2, nullptr);
  ASSERT_NE(gemma2, nullptr);
  const std::string dir = TempDir("arch_mismatch");
  const std::vector<TokenId> prompt = {464, 300, 715, 293, 466};
  ASSERT_TRUE(RunToEnd(qwen2.get(), Fixed(prompt, 4, 0)).ok());
  ASSERT_TRUE(qwen2->SaveSlot(0, dir + "/qwen2.bin").ok());
  ASSERT_TRUE(RunToEnd(gemma2.get(), Fixed(prompt, 4, 0)).ok());
  const uint64_t n_cached = gemma2->Slots()[0].n_cached;

  auto r = gemma2->RestoreSlot(0, dir + "/qwen2.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "model_mismatch") << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("model fingerprint"));
  EXPECT_EQ(gemma2->Slots()[0].n_cached, n_cached);  // the slot is untouched
}

}  // namespace
}  // namespace kvault
