// The forward pass over the paged cache: paging, batching, save/restore and
// threading must not change a single bit of the logits; errors leave the
// cache untouched. Uses generated models, so it needs no ../shared files.
#include "model/inference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fault_injecting_env.h"
#include "core/memory_file.h"
#include "kv/state_file.h"
#include "model/gen_model.h"
#include "model/gguf_file.h"
#include "model/rope.h"

namespace kvault {
namespace {

std::unique_ptr<LlamaModel> MakeModel(GgmlType type = GgmlType::kF32,
                                      uint32_t n_head_kv = 2) {
  GenModelOptions options;
  options.n_embd = 64;
  options.n_layer = 2;
  options.n_head = 4;
  options.n_head_kv = n_head_kv;
  options.n_ff = 128;
  options.type = type;
  options.seed = 7;
  auto image = std::make_shared<std::string>();
  StringWritableFile out(image.get());
  EXPECT_TRUE(GenerateLlamaModel(options, &out).ok());
  auto file = GgufFile::FromBuffer(image);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto model = LlamaModel::FromGguf(std::move(*file));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(*model);
}

std::unique_ptr<KvCache> MakeCache(const LlamaModel& model, uint32_t num_pages,
                                   uint32_t page_size,
                                   KvDtype dtype = KvDtype::kF16,
                                   KvPolicy policy = KvPolicy::kPaged) {
  KvCacheOptions options;
  options.num_pages = num_pages;
  options.page_size = page_size;
  options.policy = policy;
  options.layout = model.KvLayoutFor(dtype);
  auto cache = KvCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return std::move(*cache);
}

std::vector<TokenId> Prompt(size_t n, uint32_t salt) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 11 + 3) % 250);
  return ids;
}

TokenId Argmax(const float* logits, size_t n) {
  return static_cast<TokenId>(std::max_element(logits, logits + n) - logits);
}

// What one sequence's run produced: every logit row, and the tokens.
struct GenRun {
  std::vector<float> logits;
  std::vector<TokenId> tokens;
};

// Prefills `prompt` in one batch (logits for every token), then decodes
// `num_gen` greedy tokens one at a time.
GenRun Generate(InferenceContext& ctx, SeqId seq,
                const std::vector<TokenId>& prompt, int num_gen,
                Pos first_pos = 0) {
  GenRun run;
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({seq, prompt[i], first_pos + static_cast<Pos>(i), true});
  }
  const size_t n_vocab = ctx.model().n_vocab();
  Pos pos = first_pos + static_cast<Pos>(prompt.size());
  for (int step = 0; step <= num_gen; ++step) {
    auto logits = ctx.Decode(batch);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    if (!logits.ok()) return run;
    run.logits.insert(run.logits.end(), logits->begin(), logits->end());
    const TokenId next =
        Argmax(logits->data() + logits->size() - n_vocab, n_vocab);
    run.tokens.push_back(next);
    batch = {{seq, next, pos++, true}};
  }
  return run;
}

bool PagesContiguous(const KvCache& cache, SeqId seq) {
  auto pages = cache.table().Pages(seq);
  for (size_t i = 1; i < pages.size(); ++i) {
    if (pages[i].value() != pages[i - 1].value() + 1) return false;
  }
  return true;
}

// Fills every page of `cache` with its own filler sequence (ids 100 + page),
// then drops the fillers of every other page in a seeded random order, so
// the free pages interleave with used ones and are handed out of order.
void Fragment(KvCache& cache, uint64_t seed = 42) {
  SCOPED_TRACE("fragment seed " + std::to_string(seed));
  const uint32_t page_size = cache.pool().page_size();
  const uint32_t num_pages = cache.pool().num_pages();
  std::vector<TokenPos> page(page_size);
  for (uint32_t j = 0; j < page_size; ++j) page[j] = {1, static_cast<Pos>(j)};
  for (uint32_t i = 0; i < num_pages; ++i) {
    ASSERT_TRUE(cache.Append(SeqId(100 + i), page).ok());
  }
  std::vector<uint32_t> drop;
  for (uint32_t i = 0; i < num_pages; i += 2) drop.push_back(i);
  std::mt19937_64 rng(seed);
  std::shuffle(drop.begin(), drop.end(), rng);
  for (uint32_t i : drop) cache.RemoveSequence(SeqId(100 + i));
}

class PagingTest
    : public ::testing::TestWithParam<std::tuple<uint32_t, KvDtype>> {};

TEST_P(PagingTest, FragmentedCacheGivesBitIdenticalLogits) {
  const auto [page_size, dtype] = GetParam();
  auto model = MakeModel();
  const size_t prompt_len = page_size >= 16 ? 2 * page_size + 5 : 21;
  const int num_gen = 4;
  const uint32_t num_pages =
      static_cast<uint32_t>((prompt_len + num_gen + page_size) / page_size);
  const auto prompt = Prompt(prompt_len, 1);

  auto contiguous =
      MakeCache(*model, num_pages, page_size, dtype, KvPolicy::kContiguous);
  InferenceContext ctx_a(model.get(), contiguous.get());
  GenRun a = Generate(ctx_a, SeqId(1), prompt, num_gen);
  EXPECT_TRUE(PagesContiguous(*contiguous, SeqId(1)));

  auto fragmented = MakeCache(*model, 2 * num_pages, page_size, dtype);
  Fragment(*fragmented);
  InferenceContext ctx_b(model.get(), fragmented.get());
  GenRun b = Generate(ctx_b, SeqId(1), prompt, num_gen);
  ASSERT_GT(fragmented->table().Pages(SeqId(1)).size(), 1u);
  EXPECT_FALSE(PagesContiguous(*fragmented, SeqId(1)));

  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(),
                           a.logits.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(
    PageSizesAndDtypes, PagingTest,
    ::testing::Combine(::testing::Values(1u, 16u, 256u),
                       ::testing::Values(KvDtype::kF16, KvDtype::kF32,
                                         KvDtype::kQ8_0)),
    [](const auto& info) {
      return "page" + std::to_string(std::get<0>(info.param)) + "_" +
             std::string(DtypeName(std::get<1>(info.param)));
    });

// Runs each of `prompts` alone in its own cache.
std::vector<GenRun> RunAlone(const LlamaModel& model,
                             const std::vector<std::vector<TokenId>>& prompts,
                             int num_gen) {
  std::vector<GenRun> runs;
  for (const auto& prompt : prompts) {
    auto cache = MakeCache(model, 16, 16);
    InferenceContext ctx(&model, cache.get());
    runs.push_back(Generate(ctx, SeqId(1), prompt, num_gen));
  }
  return runs;
}

TEST(InferenceTest, BatchedSequencesMatchEachAlone) {
  auto model = MakeModel();
  const std::vector<std::vector<TokenId>> prompts = {Prompt(9, 1), Prompt(3, 2),
                                                     Prompt(14, 3)};
  const int num_gen = 5;
  const std::vector<GenRun> alone = RunAlone(*model, prompts, num_gen);
  const size_t n_vocab = model->n_vocab();

  auto cache = MakeCache(*model, 32, 16);
  InferenceContext ctx(model.get(), cache.get());
  std::vector<BatchToken> batch;  // all prefills in one batch
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (size_t i = 0; i < prompts[s].size(); ++i) {
      batch.push_back(
          {SeqId(10 + s), prompts[s][i], static_cast<Pos>(i), true});
    }
  }
  std::vector<GenRun> together(prompts.size());
  for (int step = 0; step <= num_gen; ++step) {
    auto logits = ctx.Decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    size_t row = 0;
    std::vector<BatchToken> next;
    for (size_t t = 0; t < batch.size(); ++t, ++row) {
      GenRun& run = together[batch[t].seq.value() - 10];
      const float* l = logits->data() + row * n_vocab;
      run.logits.insert(run.logits.end(), l, l + n_vocab);
      const bool last =
          t + 1 == batch.size() || batch[t + 1].seq != batch[t].seq;
      if (!last) continue;
      run.tokens.push_back(Argmax(l, n_vocab));
      next.push_back({batch[t].seq, run.tokens.back(), batch[t].pos + 1, true});
    }
    batch = next;
  }
  for (size_t s = 0; s < prompts.size(); ++s) {
    SCOPED_TRACE("sequence " + std::to_string(s));
    EXPECT_EQ(alone[s].tokens, together[s].tokens);
    ASSERT_EQ(alone[s].logits.size(), together[s].logits.size());
    EXPECT_EQ(0, std::memcmp(alone[s].logits.data(), together[s].logits.data(),
                             alone[s].logits.size() * sizeof(float)));
  }
}

// A long prefill of one sequence and single decode tokens of two others in
// the same batch; only the wanted rows come back, in batch order.
TEST(InferenceTest, MixedPrefillAndDecodeBatch) {
  auto model = MakeModel();
  const size_t n_vocab = model->n_vocab();
  const auto long_prompt = Prompt(40, 4);
  const auto short_a = Prompt(6, 5);
  const auto short_b = Prompt(4, 6);

  // Reference: each alone; the shorts' next token after their prompts.
  auto ref_cache = MakeCache(*model, 16, 16);
  InferenceContext ref(model.get(), ref_cache.get());
  GenRun ref_long = Generate(ref, SeqId(1), long_prompt, 0);
  GenRun ref_a = Generate(ref, SeqId(2), short_a, 1);
  GenRun ref_b = Generate(ref, SeqId(3), short_b, 1);

  auto cache = MakeCache(*model, 16, 16);
  InferenceContext ctx(model.get(), cache.get());
  Generate(ctx, SeqId(2), short_a, 0);
  Generate(ctx, SeqId(3), short_b, 0);
  std::vector<BatchToken> batch;
  batch.push_back(
      {SeqId(2), ref_a.tokens[0], static_cast<Pos>(short_a.size()), true});
  for (size_t i = 0; i < long_prompt.size(); ++i) {
    batch.push_back({SeqId(1), long_prompt[i], static_cast<Pos>(i),
                     i + 1 == long_prompt.size()});
  }
  batch.push_back(
      {SeqId(3), ref_b.tokens[0], static_cast<Pos>(short_b.size()), true});
  auto logits = ctx.Decode(batch);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  ASSERT_EQ(logits->size(), 3 * n_vocab);
  auto same = [&](const GenRun& run, size_t run_row, size_t out_row) {
    return 0 == std::memcmp(run.logits.data() + run_row * n_vocab,
                            logits->data() + out_row * n_vocab,
                            n_vocab * sizeof(float));
  };
  EXPECT_TRUE(same(ref_a, short_a.size(), 0));
  EXPECT_TRUE(same(ref_long, long_prompt.size() - 1, 1));
  EXPECT_TRUE(same(ref_b, short_b.size(), 2));
  EXPECT_EQ(cache->table().Length(SeqId(1)), long_prompt.size());
}

TEST(InferenceTest, SaveRestoreIntoFragmentedPoolIsInvisible) {
  auto model = MakeModel();
  const auto prompt = Prompt(11, 7);
  const int k = 4, more = 4;
  auto ref_cache = MakeCache(*model, 8, 4);
  InferenceContext ref(model.get(), ref_cache.get());
  GenRun whole = Generate(ref, SeqId(1), prompt, k + more);

  auto cache = MakeCache(*model, 8, 4);
  InferenceContext ctx(model.get(), cache.get());
  GenRun first = Generate(ctx, SeqId(1), prompt, k);
  FaultInjectingEnv env;
  ASSERT_TRUE(env.CreateDir("/state").ok());
  SaveOptions save;
  ASSERT_TRUE(SaveSequenceToFile(&env, *cache, SeqId(1), model->fingerprint(),
                                 "/state/slot1", save)
                  .ok());
  // Wipe, move to a fragmented pool, restore there.
  auto frag = MakeCache(*model, 16, 4);
  Fragment(*frag);
  auto restored = RestoreSequenceFromFile(
      &env, "/state/slot1", model->fingerprint(), SeqId(1), frag.get());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  cache.reset();
  EXPECT_FALSE(PagesContiguous(*frag, SeqId(1)));
  // The last generated token is not in the cache yet: continue from it.
  InferenceContext ctx2(model.get(), frag.get());
  const Pos pos = static_cast<Pos>(prompt.size() + k);
  GenRun second =
      Generate(ctx2, SeqId(1), {first.tokens.back()}, more - 1, pos);

  std::vector<TokenId> tokens = first.tokens;
  tokens.insert(tokens.end(), second.tokens.begin(), second.tokens.end());
  EXPECT_EQ(tokens, whole.tokens);
  std::vector<float> logits = first.logits;
  logits.insert(logits.end(), second.logits.begin(), second.logits.end());
  ASSERT_EQ(logits.size(), whole.logits.size());
  EXPECT_EQ(0, std::memcmp(logits.data(), whole.logits.data(),
                           logits.size() * sizeof(float)));
}

// Prefill in one batch and token by token agree, and threads change nothing.
TEST(InferenceTest, PrefillSplitAndThreadsAreInvisible) {
  auto model = MakeModel(GgmlType::kQ8_0);
  const auto prompt = Prompt(19, 8);
  const size_t n_vocab = model->n_vocab();
  auto cache_a = MakeCache(*model, 8, 16);
  InferenceContext a(model.get(), cache_a.get());
  GenRun one_batch = Generate(a, SeqId(1), prompt, 3);

  auto cache_b = MakeCache(*model, 8, 16);
  InferenceContext b(model.get(), cache_b.get(), {.num_threads = 3});
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); ++i) {
    auto l = b.Decode(std::vector<BatchToken>{
        {SeqId(1), prompt[i], static_cast<Pos>(i), true}});
    ASSERT_TRUE(l.ok());
    logits.insert(logits.end(), l->begin(), l->end());
  }
  GenRun rest =
      Generate(b, SeqId(1), {Argmax(&logits[logits.size() - n_vocab], n_vocab)},
               2, static_cast<Pos>(prompt.size()));
  logits.insert(logits.end(), rest.logits.begin(), rest.logits.end());
  ASSERT_EQ(logits.size(), one_batch.logits.size());
  EXPECT_EQ(0, std::memcmp(logits.data(), one_batch.logits.data(),
                           logits.size() * sizeof(float)));
}

// The generator draws the same weights for every type, so quantized models
// must give logits close to the f32 model's (bounds 3-10x the observed
// error; unrelated logits would be ~1.4 apart relative to their scale).
TEST(InferenceTest, EveryWeightTypeTracksF32) {
  const auto prompt = Prompt(8, 9);
  auto last_logits = [&](GgmlType type) {
    auto model = MakeModel(type);
    auto cache = MakeCache(*model, 4, 16);
    InferenceContext ctx(model.get(), cache.get());
    GenRun run = Generate(ctx, SeqId(1), prompt, 0);
    const size_t n_vocab = model->n_vocab();
    return std::vector<float>(run.logits.end() - n_vocab, run.logits.end());
  };
  const std::vector<float> f32 = last_logits(GgmlType::kF32);
  float scale = 0;
  for (float v : f32) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.0f);
  // bf16 keeps 8 mantissa bits to f16's 11: about 8x f16's error.
  const std::pair<GgmlType, float> cases[] = {{GgmlType::kF16, 5e-3f},
                                              {GgmlType::kBF16, 2e-2f},
                                              {GgmlType::kQ8_0, 0.1f},
                                              {GgmlType::kQ4_0, 0.5f}};
  for (const auto& [type, tol] : cases) {
    const std::vector<float> other = last_logits(type);
    ASSERT_EQ(other.size(), f32.size());
    float max_diff = 0;
    for (size_t i = 0; i < f32.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(other[i] - f32[i]));
    }
    std::cout << GgmlTypeName(type)
              << ": max |logit - f32| / max|f32| = " << max_diff / scale
              << "\n";
    EXPECT_LT(max_diff / scale, tol) << GgmlTypeName(type);
  }
}

// With contiguous+defrag, placing a later sequence of the batch may
// defragment and move the cells an earlier sequence was just given; K/V
// must still land in the cells the sequences own when attention runs.
TEST(InferenceTest, DefragDuringBatchAppendIsInvisible) {
  auto model = MakeModel();
  const size_t n_vocab = model->n_vocab();
  const auto prompt_a = Prompt(4, 10);
  const auto prompt_b = Prompt(8, 11);
  auto ref_cache = MakeCache(*model, 8, 4);
  InferenceContext ref(model.get(), ref_cache.get());
  GenRun ref_a = Generate(ref, SeqId(1), prompt_a, 1);
  GenRun ref_b = Generate(ref, SeqId(2), prompt_b, 0);

  auto cache =
      MakeCache(*model, 6, 4, KvDtype::kF16, KvPolicy::kContiguousDefrag);
  InferenceContext ctx(model.get(), cache.get());
  const std::vector<TokenPos> page(4, TokenPos{1, 0});
  auto fill = [&](uint32_t seq) {
    std::vector<TokenPos> p = page;
    for (int j = 0; j < 4; ++j) p[j].pos = j;
    ASSERT_TRUE(cache->Append(SeqId(seq), p).ok());
  };
  fill(100);                             // page 0
  Generate(ctx, SeqId(1), prompt_a, 0);  // page 1
  fill(101);                             // page 2
  fill(102);                             // page 3
  fill(103);                             // page 4; page 5 free
  cache->RemoveSequence(SeqId(100));
  cache->RemoveSequence(SeqId(102));  // free: 0, 3, 5
  std::vector<BatchToken> batch = {
      {SeqId(1), ref_a.tokens[0], static_cast<Pos>(prompt_a.size()), true}};
  for (size_t i = 0; i < prompt_b.size(); ++i) {
    batch.push_back(
        {SeqId(2), prompt_b[i], static_cast<Pos>(i), i + 1 == prompt_b.size()});
  }
  auto logits = ctx.Decode(batch);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  EXPECT_EQ(cache->counters().defrag_runs, 1u);
  ASSERT_EQ(logits->size(), 2 * n_vocab);
  EXPECT_EQ(0, std::memcmp(logits->data(),
                           ref_a.logits.data() + prompt_a.size() * n_vocab,
                           n_vocab * sizeof(float)));
  EXPECT_EQ(0,
            std::memcmp(logits->data() + n_vocab,
                        ref_b.logits.data() + (prompt_b.size() - 1) * n_vocab,
                        n_vocab * sizeof(float)));
}

TEST(RopeTest, RotatesPairsByPositionTimesFrequency) {
  const std::vector<Pos> positions = {0, 1, 2};
  RopeTable rope(positions, /*n_rot=*/4, /*freq_base=*/10000.0f,
                 /*freq_scale=*/0.5f);
  // Token 0 (pos 0): identity. Head dim 6: dims 4 and 5 are not rotated.
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  rope.Apply(RopeStyle::kNormal, 0, x.data(), 1, 6);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Token 2 (pos 2, scale 0.5): pair 0 by 1 rad, pair 1 by 0.01 rad.
  x = {1, 0, 1, 0, 7, 8};
  rope.Apply(RopeStyle::kNormal, 2, x.data(), 1, 6);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
  EXPECT_EQ(x[4], 7);
  EXPECT_EQ(x[5], 8);
  // Neox pairs (0, 2) and (1, 3); two heads rotate alike.
  x = {1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  rope.Apply(RopeStyle::kNeox, 2, x.data(), 2, 6);
  for (int h = 0; h < 2; ++h) {
    const float* y = &x[h * 6];
    EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);
    EXPECT_NEAR(y[2], std::sin(1.0), 1e-6);
    EXPECT_NEAR(y[1], std::cos(0.01), 1e-6);
    EXPECT_NEAR(y[3], std::sin(0.01), 1e-6);
  }
}

TEST(InferenceTest, RejectsBadBatchesWithoutTouchingTheCache) {
  auto model = MakeModel();
  auto cache = MakeCache(*model, 4, 4);
  InferenceContext ctx(model.get(), cache.get());
  EXPECT_EQ(ctx.Decode({}).status().code(), StatusCode::kInvalidArgument);
  const TokenId too_big = static_cast<TokenId>(model->n_vocab());
  EXPECT_EQ(ctx.Decode(std::vector<BatchToken>{{SeqId(1), too_big, 0}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ctx.Decode(std::vector<BatchToken>{{SeqId(1), 5, 3}, {SeqId(1), 6, 3}})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.Decode(std::vector<BatchToken>{{kRestoreScratchSeq, 5, 0}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(
      ctx.Decode(std::vector<BatchToken>{{SeqId(1), 5, 0}, {SeqId(1), 6, 1}})
          .ok());
  // Position not above the cached ones.
  EXPECT_EQ(
      ctx.Decode(std::vector<BatchToken>{{SeqId(1), 5, 1}}).status().code(),
      StatusCode::kInvalidArgument);
  // Seq 1 fits (2 more cells) but seq 2 does not: all or nothing.
  std::vector<BatchToken> batch = {{SeqId(1), 5, 2}, {SeqId(1), 5, 3}};
  for (Pos p = 0; p < 15; ++p) batch.push_back({SeqId(2), 5, p});
  auto result = ctx.Decode(batch);
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache->table().Length(SeqId(1)), 2u);
  EXPECT_FALSE(cache->table().Contains(SeqId(2)));
  EXPECT_TRUE(CheckInvariants(cache->table()).ok());
  EXPECT_EQ(cache->Stats().allocated_cells, 4u);
}

TEST(InferenceTest, RejectsCacheOfAnotherShape) {
  auto model = MakeModel();
  auto other = MakeModel(GgmlType::kF32, 4);
  auto cache = MakeCache(*other, 4, 4);
  InferenceContext ctx(model.get(), cache.get());
  auto result = ctx.Decode(std::vector<BatchToken>{{SeqId(1), 5, 0, true}});
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->table().Length(SeqId(1)), 0u);
}


// Layer 0's key of a token depends on the token and its position only, so
// after a context shift each moved cell's layer-0 key must be the key the
// token gets when decoded at its new position; values move unchanged.
TEST(InferenceTest, DiscardRangeMovesCellsAndRotatesKeys) {
  auto model = MakeModel();
  const std::vector<TokenId> prompt = Prompt(40, 5);
  auto cache = MakeCache(*model, 8, 16, KvDtype::kF32);
  InferenceContext ctx(model.get(), cache.get());
  Generate(ctx, SeqId(0), prompt, 0);
  const KvStorage& storage = *cache->storage();
  const uint64_t k_elems = storage.layout().k_row_elems();
  const uint64_t v_elems = storage.layout().v_row_elems();
  auto row_of = [&](SeqId seq, size_t i, bool key, uint32_t layer) {
    std::vector<float> row(key ? k_elems : v_elems);
    const CellId cell = cache->table().CellAt(seq, i);
    if (key)
      storage.Read(KvSide::kK, layer, cell, row);
    else
      storage.Read(KvSide::kV, layer, cell, row);
    return row;
  };
  std::vector<std::vector<float>> v_before;
  for (size_t i = 20; i < 40; ++i) v_before.push_back(row_of(SeqId(0), i, false, 1));

  ASSERT_TRUE(ctx.DiscardRange(SeqId(0), 4, 20).ok());

  std::span<const TokenPos> cells = cache->table().Cells(SeqId(0));
  ASSERT_EQ(cells.size(), 24u);
  for (size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(cells[i].pos, static_cast<Pos>(i));
    EXPECT_EQ(cells[i].token, prompt[i < 4 ? i : i + 16]);
  }
  // The same tokens decoded fresh at the new positions 4.. (layer 0 only
  // sees the token and its position).
  std::vector<TokenId> fresh(prompt.begin() + 20, prompt.end());
  auto fresh_cache = MakeCache(*model, 8, 16, KvDtype::kF32);
  InferenceContext fresh_ctx(model.get(), fresh_cache.get());
  Generate(fresh_ctx, SeqId(0), fresh, 0, 4);
  const KvStorage& fresh_storage = *fresh_cache->storage();
  for (size_t i = 4; i < 24; ++i) {
    SCOPED_TRACE("cell " + std::to_string(i));
    std::vector<float> shifted = row_of(SeqId(0), i, true, 0);
    std::vector<float> expect(k_elems);
    fresh_storage.Read(KvSide::kK, 0,
                       fresh_cache->table().CellAt(SeqId(0), i - 4), expect);
    for (uint64_t e = 0; e < k_elems; ++e) {
      EXPECT_NEAR(shifted[e], expect[e], 1e-4f * (1 + std::fabs(expect[e])));
    }
    EXPECT_EQ(row_of(SeqId(0), i, false, 1), v_before[i - 4]);
  }
  // Decoding goes on at the next position.
  auto next = ctx.Decode(std::vector<BatchToken>{{SeqId(0), 7, 24, true}});
  EXPECT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_FALSE(ctx.DiscardRange(SeqId(0), 5, 5).ok());
  EXPECT_FALSE(ctx.DiscardRange(SeqId(0), -1, 3).ok());
}

}  // namespace
}  // namespace kvault
