#include "model/generator.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kv/kv_cache.h"
#include "model/inference.h"
#include "model/llama_model.h"
#include "model/sampler.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr TokenId kEos = 2;
constexpr int kVocab = 8;

// A fake forward pass: the logits of a token at position p peak at
// script[p] (or at token 7 past the script's end); every call is recorded.
struct FakeModel {
  std::vector<TokenId> script;
  std::vector<std::vector<BatchToken>> calls;
  int fail_at_call = -1;  // this call returns Internal

  Generator::DecodeFn Fn() {
    return [this](std::span<const BatchToken> batch)
               -> StatusOr<std::vector<float>> {
      calls.emplace_back(batch.begin(), batch.end());
      if (static_cast<int>(calls.size()) - 1 == fail_at_call) {
        return InternalError("fake failure");
      }
      std::vector<float> logits;
      for (const BatchToken& t : batch) {
        if (!t.want_logits) continue;
        std::vector<float> row(kVocab, 0.0f);
        const size_t p = static_cast<size_t>(t.pos);
        row[p < script.size() ? script[p] : 7] = 10.0f;
        logits.insert(logits.end(), row.begin(), row.end());
      }
      return logits;
    };
  }
};

Vocab FakeVocab() {
  Vocab vocab;
  for (int i = 0; i < kVocab; ++i) {
    vocab.tokens.push_back("t" + std::to_string(i));
  }
  vocab.eos = kEos;
  return vocab;
}

GeneratorOptions Options(uint32_t max_new, uint32_t chunk) {
  GeneratorOptions o;
  o.max_new_tokens = max_new;
  o.prefill_chunk = chunk;
  return o;
}

TEST(GeneratorTest, PrefillsInChunksThenDecodesOneAtATime) {
  FakeModel fake;
  // Positions 0..9 are the prompt; the token sampled from position p's
  // logits is script[p].
  fake.script = {0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 5, 6, 3, 1};
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(3));
  Sampler sampler(SamplingParams::Greedy());
  const std::vector<TokenId> prompt = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<TokenId> streamed;
  auto result = gen.Generate(prompt, &sampler, Options(4, 4),
                             [&](TokenId id) {
                               streamed.push_back(id);
                               return true;
                             });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->tokens, ElementsAre(4, 5, 6, 3));
  EXPECT_EQ(streamed, result->tokens);
  EXPECT_EQ(result->stop, StopReason::kMaxTokens);
  ASSERT_EQ(fake.calls.size(), 3u + 3u);  // 4+4+2 prompt, then 3 decodes
  EXPECT_EQ(fake.calls[0].size(), 4u);
  EXPECT_EQ(fake.calls[1].size(), 4u);
  EXPECT_EQ(fake.calls[2].size(), 2u);
  Pos want_pos = 0;
  for (size_t c = 0; c < fake.calls.size(); ++c) {
    for (size_t i = 0; i < fake.calls[c].size(); ++i) {
      const BatchToken& t = fake.calls[c][i];
      EXPECT_EQ(t.seq, SeqId(3));
      EXPECT_EQ(t.pos, want_pos++);
      const bool last_of_prompt = c == 2 && i == 1;
      EXPECT_EQ(t.want_logits, c >= 2 && (c > 2 || last_of_prompt));
    }
  }
  EXPECT_EQ(fake.calls[3][0].token, 4);
  EXPECT_EQ(fake.calls[5][0].token, 6);
  // The last token is sampled but not fed.
  EXPECT_EQ(gen.pending(), std::optional<TokenId>(3));
  EXPECT_EQ(gen.next_pos(), 13);
  EXPECT_EQ(result->timings.num_prompt_tokens, 10u);
  EXPECT_EQ(result->timings.num_generated, 4u);
  EXPECT_EQ(result->timings.num_decode_steps, 3u);
}

TEST(GeneratorTest, ContinuingFeedsThePendingTokenFirst) {
  FakeModel fake;
  fake.script = {0, 4, 5, 6, 0, 1, 3};
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  const std::vector<TokenId> first = {1, 1};
  ASSERT_TRUE(gen.Generate(first, &sampler, Options(2, 512)).ok());
  // Fed: pos 0,1 prompt; pos 2 = token 4; token 5 pending for pos 3.
  const std::vector<TokenId> second = {7, 7};
  auto result = gen.Generate(second, &sampler, Options(2, 512));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<BatchToken>& prefill = fake.calls[2];
  ASSERT_EQ(prefill.size(), 3u);
  EXPECT_EQ(prefill[0].token, 5);
  EXPECT_EQ(prefill[0].pos, 3);
  EXPECT_EQ(prefill[2].pos, 5);
  EXPECT_THAT(result->tokens, ElementsAre(1, 3));
  EXPECT_EQ(result->timings.num_prompt_tokens, 3u);
}

TEST(GeneratorTest, StopsAtEndOfGenerationWithoutEmittingIt) {
  FakeModel fake;
  fake.script = {0, 5, 6, kEos, 4};
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  std::vector<TokenId> streamed;
  const std::vector<TokenId> prompt = {1, 1};
  auto result = gen.Generate(prompt, &sampler, Options(100, 512),
                             [&](TokenId id) {
                               streamed.push_back(id);
                               return true;
                             });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stop, StopReason::kEndOfGeneration);
  EXPECT_THAT(result->tokens, ElementsAre(5, 6));
  EXPECT_THAT(streamed, ElementsAre(5, 6));
  EXPECT_STREQ(StopReasonName(result->stop), "eog");

  FakeModel again;
  again.script = fake.script;
  Generator no_stop(again.Fn(), &vocab, SeqId(0));
  GeneratorOptions o = Options(3, 512);
  o.stop_at_eog = false;
  auto all = no_stop.Generate(prompt, &sampler, o);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(all->tokens, ElementsAre(5, 6, kEos));
}

TEST(GeneratorTest, CallbackCanStop) {
  FakeModel fake;
  fake.script = {4, 5, 6, 3};
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  const std::vector<TokenId> prompt = {1};
  auto result = gen.Generate(prompt, &sampler, Options(10, 512),
                             [](TokenId id) { return id != 5; });
  ASSERT_TRUE(result.ok());
  EXPECT_THAT(result->tokens, ElementsAre(4, 5));
  EXPECT_EQ(result->stop, StopReason::kCallback);
}

TEST(GeneratorTest, ContextLimit) {
  FakeModel fake;
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  GeneratorOptions o = Options(100, 512);
  o.n_ctx = 6;
  const std::vector<TokenId> too_long(7, 1);
  auto rejected = gen.Generate(too_long, &sampler, o);
  EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("context of 6"));
  EXPECT_TRUE(fake.calls.empty());
  const std::vector<TokenId> prompt(4, 1);
  auto result = gen.Generate(prompt, &sampler, o);
  ASSERT_TRUE(result.ok());
  // Positions 4 and 5 are fed; the token sampled from position 5's logits
  // would need position 6.
  EXPECT_EQ(result->stop, StopReason::kContextFull);
  EXPECT_EQ(result->tokens.size(), 3u);
  EXPECT_EQ(gen.next_pos(), 6);
}

TEST(GeneratorTest, BadInputAndForwardErrors) {
  FakeModel fake;
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  EXPECT_EQ(gen.Generate({}, &sampler, Options(1, 512)).status().code(),
            StatusCode::kInvalidArgument);
  const std::vector<TokenId> prompt = {1, 2, 3};
  EXPECT_EQ(gen.Generate(prompt, &sampler, Options(1, 0)).status().code(),
            StatusCode::kInvalidArgument);
  fake.fail_at_call = 2;  // the second decode step
  auto result = gen.Generate(prompt, &sampler, Options(10, 512));
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("decode at position 4"));
  EXPECT_EQ(gen.next_pos(), 4);
  EXPECT_TRUE(gen.pending().has_value());
}

TEST(GeneratorTest, ZeroNewTokensOnlyPrefills) {
  FakeModel fake;
  const Vocab vocab = FakeVocab();
  Generator gen(fake.Fn(), &vocab, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  const std::vector<TokenId> prompt = {1, 2};
  auto result = gen.Generate(prompt, &sampler, Options(0, 512));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->tokens.empty());
  EXPECT_EQ(fake.calls.size(), 1u);
  EXPECT_EQ(gen.next_pos(), 2);
}

// ---- With the real forward pass on ../shared/models/stories260K.gguf ----

const std::string kShared = std::string(KVAULT_SOURCE_DIR) + "/../shared";

struct Golden {
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> gen_ids;
};

std::vector<Golden> LoadGolden(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Golden> cases;
  for (const auto& c : j.at("cases")) {
    cases.push_back({c.at("prompt_ids").get<std::vector<TokenId>>(),
                     c.at("gen_ids").get<std::vector<TokenId>>()});
  }
  return cases;
}

class GeneratorModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = kShared + "/models/stories260K.gguf";
    if (!std::ifstream(path)) GTEST_SKIP() << path << " missing";
    cases_ = LoadGolden(kShared + "/golden/stories260K.json");
    if (cases_.empty()) GTEST_SKIP() << "golden stories260K.json missing";
    auto model = LlamaModel::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  // Greedy generation of `num` tokens after `prompt` in a fresh cache.
  std::vector<TokenId> Greedy(const std::vector<TokenId>& prompt, uint32_t num,
                              uint32_t chunk, StopReason* stop = nullptr) {
    KvCacheOptions options;
    options.page_size = 16;
    options.num_pages = 64;
    options.layout = model_->KvLayoutFor(KvDtype::kF16);
    auto cache = KvCache::Create(options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (!cache.ok()) return {};
    InferenceContext context(model_.get(), cache->get(), {.num_threads = 3});
    Generator gen(&context, SeqId(1));
    Sampler sampler(SamplingParams::Greedy());
    auto result = gen.Generate(prompt, &sampler, Options(num, chunk));
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    if (stop != nullptr) *stop = result->stop;
    return result->tokens;
  }

  std::unique_ptr<LlamaModel> model_;
  std::vector<Golden> cases_;
};

TEST_F(GeneratorModelTest, GreedyMatchesLlamaCpp) {
  for (size_t i = 0; i < cases_.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "golden case " << i);
    const Golden& c = cases_[i];
    StopReason stop;
    EXPECT_EQ(Greedy(c.prompt_ids, c.gen_ids.size(), 512, &stop), c.gen_ids);
    EXPECT_EQ(stop, StopReason::kMaxTokens);
  }
}

TEST_F(GeneratorModelTest, PrefillChunkSizeDoesNotChangeTokens) {
  const Golden& c = cases_[1];
  EXPECT_EQ(Greedy(c.prompt_ids, 16, 3),
            std::vector<TokenId>(c.gen_ids.begin(), c.gen_ids.begin() + 16));
}

}  // namespace
}  // namespace kvault
