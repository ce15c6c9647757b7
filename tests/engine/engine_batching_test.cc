// The engine on the real stories260K model: continuous batching gives the
// tokens of solo runs, long prompts are chunked between decode steps,
// prompt caching, slot choice, cancellation, stop strings, Submit errors.
#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace kvault {
namespace {

using engine_test::Concat;
using engine_test::EventLog;
using engine_test::Greedy;
using engine_test::RecordingSink;
using engine_test::RunToEnd;
using engine_test::SoloGreedy;

class EngineBatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = engine_test::LoadStories();
    if (reference_ == nullptr) {
      GTEST_SKIP() << engine_test::StoriesPath() << " missing";
    }
  }

  std::unique_ptr<Engine> Start(const EngineOptions& options) {
    auto engine = Engine::Create(engine_test::LoadStories(), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  static EngineOptions Options(uint32_t n_slots) {
    EngineOptions o;
    o.n_ctx_total = 2048;
    o.n_slots = n_slots;
    o.ctx_per_slot = 512;
    o.num_threads = 2;
    o.prefill_chunk = 8;
    return o;
  }

  std::vector<TokenId> Tokens(const std::string& text, bool bos = true) {
    return reference_->tokenizer().Tokenize(text, bos, false);
  }

  std::unique_ptr<LlamaModel> reference_;
};

TEST_F(EngineBatchingTest, ConcurrentSlotsMatchSoloRuns) {
  auto engine = Start(Options(4));
  const std::vector<std::string> texts = {
      "Once upon a time", "The little dog", "Lily wanted to play with",
      "One day, a big bird"};
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (uint32_t i = 0; i < texts.size(); ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine->Submit(Greedy(Tokens(texts[i]), 24, i), sinks[i]).ok());
  }
  for (uint32_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(texts[i]);
    auto result = sinks[i]->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->slot, i);
    EXPECT_EQ(result->tokens, SoloGreedy(*reference_, Tokens(texts[i]), 24,
                                         /*stop_at_eog=*/true));
    EXPECT_EQ(sinks[i]->tokens(), result->tokens);
    // Each event names its slot, so a stream never has to look it up (the
    // lookup once failed for a task that had ended: "id_slot": -1).
    for (const TokenEvent& event : sinks[i]->events()) {
      EXPECT_EQ(event.slot, i);
    }
    EXPECT_EQ(sinks[i]->text() + result->final_text, result->content);
    std::string pieces;  // streamed text continues the prompt: no space rule
    for (TokenId t : result->tokens) {
      pieces += reference_->tokenizer().TokenToPiece(t);
    }
    EXPECT_EQ(result->content, pieces);
  }
  EXPECT_GE(engine->Metrics().requests_total, 4u);
}

TEST_F(EngineBatchingTest, LongPromptIsChunkedBetweenDecodeSteps) {
  EngineOptions options = Options(2);
  options.prefill_chunk = 32;
  auto engine = Start(options);
  std::vector<TokenId> long_prompt;
  while (long_prompt.size() < 300) {
    long_prompt = Concat(long_prompt,
                         Tokens("Tom and Sue went to the park to play. ",
                                long_prompt.empty()));
  }
  long_prompt.resize(300);

  EventLog log;
  auto a = std::make_shared<RecordingSink>("A", &log);
  auto b = std::make_shared<RecordingSink>("B", &log);
  std::promise<void> a_started, b_submitted;
  std::shared_future<void> b_submitted_future = b_submitted.get_future();
  a->OnEachToken([&](size_t n) {
    if (n != 1) return;
    a_started.set_value();
    b_submitted_future.wait();  // hold A until B is queued
  });
  CompletionParams pa = Greedy(Tokens("Once upon a time"), 40, 0);
  pa.ignore_eos = true;
  ASSERT_TRUE(engine->Submit(pa, a).ok());
  a_started.get_future().wait();
  ASSERT_TRUE(engine->Submit(Greedy(long_prompt, 4, 1), b).ok());
  log.Add("test:submitted_b");
  b_submitted.set_value();

  auto ra = a->Wait();
  auto rb = b->Wait();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(ra->tokens, SoloGreedy(*reference_, pa.prompt, 40, false));
  EXPECT_EQ(rb->tokens, SoloGreedy(*reference_, long_prompt, 4, true));
  EXPECT_EQ(rb->timings.prompt_n, 300u);
  // 300 tokens in chunks of 32 take 10 steps; A decodes in each of them.
  const std::vector<std::string> events = log.Snapshot();
  auto it = std::find(events.begin(), events.end(), "test:submitted_b");
  ASSERT_NE(it, events.end());
  int a_tokens_during_prefill = 0;
  for (++it; it != events.end() && *it != "B:token" && *it != "B:done"; ++it) {
    if (*it == "A:token") ++a_tokens_during_prefill;
  }
  EXPECT_GE(a_tokens_during_prefill, 8) << "A starved by B's prefill";
}

TEST_F(EngineBatchingTest, CachePromptReusesTheCommonPrefix) {
  auto engine = Start(Options(1));
  const std::vector<TokenId> p1 = Tokens("Once upon a time, there was a");
  auto r1 = RunToEnd(engine.get(), Greedy(p1, 12, 0));
  ASSERT_TRUE(r1.ok()) << r1.status();
  const uint64_t fed = p1.size() + r1->tokens.size() -
                       (r1->stop_type == "eos" ? 0 : 1);
  EXPECT_EQ(r1->tokens_cached, fed);
  EXPECT_EQ(engine->Slots()[0].n_cached, fed);

  const std::vector<TokenId> p2 =
      Concat(Concat(p1, r1->tokens), Tokens(" The sun", false));
  auto r2 = RunToEnd(engine.get(), Greedy(p2, 12, 0));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->timings.cache_n, fed);
  EXPECT_EQ(r2->timings.prompt_n, p2.size() - fed);
  EXPECT_EQ(r2->tokens_evaluated, p2.size());
  const std::vector<TokenId> cold = SoloGreedy(*reference_, p2, 12, true);
  EXPECT_EQ(r2->tokens, cold);

  CompletionParams no_cache = Greedy(p2, 12, 0);
  no_cache.cache_prompt = false;
  auto r3 = RunToEnd(engine.get(), no_cache);
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_EQ(r3->timings.cache_n, 0u);
  EXPECT_EQ(r3->timings.prompt_n, p2.size());
  EXPECT_EQ(r3->tokens, cold);

  // The whole prompt cached: only its last token is evaluated again.
  auto r4 = RunToEnd(engine.get(), Greedy(p2, 12, 0));
  ASSERT_TRUE(r4.ok()) << r4.status();
  EXPECT_EQ(r4->timings.prompt_n, 1u);
  EXPECT_EQ(r4->tokens, cold);
}

TEST_F(EngineBatchingTest, AnySlotPrefersTheLongestCachedPrefix) {
  auto engine = Start(Options(2));
  const std::vector<TokenId> pa = Tokens("The cat sat on the mat and");
  const std::vector<TokenId> pb = Tokens("A little boy named Tim had");
  ASSERT_TRUE(RunToEnd(engine.get(), Greedy(pa, 4, 0)).ok());
  ASSERT_TRUE(RunToEnd(engine.get(), Greedy(pb, 4, 1)).ok());
  auto r = RunToEnd(engine.get(), Greedy(Concat(pb, Tokens(" a", false)), 4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->slot, 1u);
  EXPECT_EQ(r->timings.cache_n, pb.size());
  auto r2 = RunToEnd(engine.get(), Greedy(Concat(pa, Tokens(" a", false)), 4));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->slot, 0u);
}

TEST_F(EngineBatchingTest, SinkReturningFalseCancelsAndKeepsTheKv) {
  auto engine = Start(Options(1));
  auto sink = std::make_shared<RecordingSink>();
  sink->CancelAtToken(3);
  CompletionParams p = Greedy(Tokens("Once upon a time"), 50, 0);
  p.ignore_eos = true;
  ASSERT_TRUE(engine->Submit(p, sink).ok());
  auto result = sink->Wait();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(result.status().reason(), kReasonCancelled);
  EXPECT_EQ(sink->tokens().size(), 3u);
  const SlotInfo slot = engine->Slots()[0];
  EXPECT_FALSE(slot.is_processing);
  EXPECT_EQ(slot.state, "idle");
  EXPECT_EQ(slot.n_cached, p.prompt.size() + 2);  // the 3rd is not decoded
}

TEST_F(EngineBatchingTest, CancelByTaskIdRunningAndQueued) {
  auto engine = Start(Options(1));
  auto running = std::make_shared<RecordingSink>();
  auto queued = std::make_shared<RecordingSink>();
  std::promise<void> started, cancelled;
  std::shared_future<void> cancelled_future = cancelled.get_future();
  running->OnEachToken([&](size_t n) {
    if (n != 1) return;
    started.set_value();
    cancelled_future.wait();  // hold the scheduler until both are cancelled
  });
  CompletionParams p = Greedy(Tokens("Once upon a time"), 200, 0);
  p.ignore_eos = true;
  auto running_id = engine->Submit(p, running);
  ASSERT_TRUE(running_id.ok());
  started.get_future().wait();
  auto queued_id = engine->Submit(Greedy(Tokens("The dog"), 5, 0), queued);
  ASSERT_TRUE(queued_id.ok());
  engine->Cancel(*queued_id);
  engine->Cancel(*running_id);
  cancelled.set_value();
  auto r1 = running->Wait();
  auto r2 = queued->Wait();
  EXPECT_EQ(r1.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(r2.status().code(), StatusCode::kCancelled);
  EXPECT_LT(running->tokens().size(), 200u);
  EXPECT_TRUE(queued->tokens().empty());
  EXPECT_EQ(running->num_done(), 1);
  EXPECT_EQ(queued->num_done(), 1);
  engine->Cancel(*running_id);  // already ended: a no-op
}

TEST_F(EngineBatchingTest, StopStringsAndNPredict) {
  auto engine = Start(Options(1));
  const std::vector<TokenId> prompt = Tokens("Once upon a time");
  auto full = RunToEnd(engine.get(), Greedy(prompt, 40, 0));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->tokens.size() == 40u, full->stop_type == "limit");
  ASSERT_GT(full->content.size(), 20u);
  // A stop string from the middle of the output: the content ends before it.
  const std::string stop = full->content.substr(10, 4);
  CompletionParams p = Greedy(prompt, 40, 0);
  p.stop = {"zzzz-never", stop};
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(p, sink).ok());
  auto stopped = sink->Wait();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->stop_type, "word");
  EXPECT_EQ(stopped->stopping_word, stop);
  EXPECT_EQ(stopped->content, full->content.substr(0, full->content.find(stop)));
  EXPECT_EQ(sink->text(), stopped->content);  // the stop word never streamed
  EXPECT_LT(stopped->tokens.size(), full->tokens.size());

  auto limited = RunToEnd(engine.get(), Greedy(prompt, 5, 0));
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->stop_type, "limit");
  EXPECT_EQ(limited->tokens.size(), 5u);
  EXPECT_FALSE(limited->truncated);
  EXPECT_EQ(limited->tokens,
            std::vector<TokenId>(full->tokens.begin(), full->tokens.begin() + 5));

  CompletionParams probs = Greedy(prompt, 3, 0);
  probs.n_probs = 4;
  auto probs_sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Submit(probs, probs_sink).ok());
  ASSERT_TRUE(probs_sink->Wait().ok());
  for (const TokenEvent& e : probs_sink->events()) {
    ASSERT_EQ(e.probs.size(), 4u);
    EXPECT_EQ(e.probs[0].id, e.token);  // greedy: the most likely token
  }
}

TEST_F(EngineBatchingTest, NPredictZeroOnlyEvaluatesThePrompt) {
  auto engine = Start(Options(1));
  const std::vector<TokenId> prompt = Tokens("Once upon a time");
  auto r = RunToEnd(engine.get(), Greedy(prompt, 0, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tokens.empty());
  EXPECT_EQ(r->stop_type, "limit");
  EXPECT_EQ(r->tokens_cached, prompt.size());
  EXPECT_EQ(r->timings.prompt_n, prompt.size());
}

TEST_F(EngineBatchingTest, ContextLimitTruncates) {
  EngineOptions options = Options(1);
  options.ctx_per_slot = 24;
  auto engine = Start(options);
  const std::vector<TokenId> prompt = Tokens("Once upon a time");
  CompletionParams p = Greedy(prompt, 100, 0);
  p.ignore_eos = true;
  auto r = RunToEnd(engine.get(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_type, "limit");
  EXPECT_TRUE(r->truncated);
  // As llama-server: prompt and output together fill the context; the
  // last token is returned, never evaluated.
  EXPECT_EQ(r->tokens_cached, 23u);
  EXPECT_EQ(r->tokens.size(), 24 - prompt.size());
}

TEST_F(EngineBatchingTest, ContextShiftGoesOnPastTheContext) {
  EngineOptions options = Options(1);
  options.ctx_per_slot = 24;
  options.context_shift = true;
  auto engine = Start(options);
  const std::vector<TokenId> prompt = Tokens("Once upon a time");
  CompletionParams p = Greedy(prompt, 60, 0);
  p.ignore_eos = true;
  auto r = RunToEnd(engine.get(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_type, "limit");
  EXPECT_EQ(r->tokens.size(), 60u);
  EXPECT_TRUE(r->truncated);  // as llama-server: a shift truncates
  EXPECT_LT(r->tokens_cached, 24u);
}

// Regression (issue 41 item 7): with context shift, a request with no
// budget (n_predict -1 and no server -n) that never meets EOS generated
// until the client left. As llama-server, it ends at the model's training
// context, prompt included.
TEST_F(EngineBatchingTest, UnboundedGenerationEndsAtTheTrainingContext) {
  EngineOptions options = Options(1);
  options.ctx_per_slot = 24;
  options.context_shift = true;
  auto engine = Start(options);
  const uint32_t n_ctx_train = reference_->hparams().n_ctx_train;
  ASSERT_GT(n_ctx_train, 24u);
  const std::vector<TokenId> prompt = Tokens("Once upon a time");
  CompletionParams p = Greedy(prompt, -1, 0);
  p.ignore_eos = true;
  auto r = RunToEnd(engine.get(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_type, "limit");
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->tokens.size() + prompt.size(), n_ctx_train);
}

TEST_F(EngineBatchingTest, PromptProgressReportsEachBatch) {
  EngineOptions options = Options(1);
  options.prefill_chunk = 8;
  auto engine = Start(options);
  std::vector<TokenId> prompt = Tokens(
      "Once upon a time there was a little girl who liked to play in the "
      "park with her dog");
  ASSERT_GT(prompt.size(), 17u);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CompletionParams p = Greedy(prompt, 2, 0);
    p.return_progress = true;
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(engine->Submit(p, sink).ok());
    ASSERT_TRUE(sink->Wait().ok());
    const auto seen = sink->progress();
    // Round 1 reuses all but the last prompt token.
    const uint64_t cache = round == 0 ? 0 : prompt.size() - 1;
    const uint64_t todo = prompt.size() - cache;
    ASSERT_EQ(seen.size(), 1 + (todo + 7) / 8);
    EXPECT_EQ(seen.front().progress.processed, cache);
    EXPECT_EQ(seen.front().progress.timings.prompt_n, 0u);
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].progress.total, prompt.size());
      EXPECT_EQ(seen[i].progress.cache, cache);
      EXPECT_EQ(seen[i].tokens_before, 0u);  // all before the first token
      if (i > 0) {
        EXPECT_GT(seen[i].progress.processed, seen[i - 1].progress.processed);
      }
    }
    EXPECT_EQ(seen.back().progress.processed, prompt.size());
  }
}

TEST_F(EngineBatchingTest, SubmitErrors) {
  auto engine = Start(Options(2));
  auto sink = std::make_shared<RecordingSink>();
  auto bad_slot = engine->Submit(Greedy(Tokens("Hi"), 4, 2), sink);
  ASSERT_FALSE(bad_slot.ok());
  EXPECT_EQ(bad_slot.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_slot.status().reason(), "slot_out_of_range");
  auto empty = engine->Submit(Greedy({}, 4), sink);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto too_long = engine->Submit(Greedy(std::vector<TokenId>(513, 5), 4), sink);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().reason(), "prompt_too_long");
  auto bad_token = engine->Submit(Greedy({1, 100000}, 4), sink);
  ASSERT_FALSE(bad_token.ok());
  EXPECT_EQ(bad_token.status().code(), StatusCode::kInvalidArgument);
  CompletionParams bad_sampling = Greedy(Tokens("Hi"), 4);
  bad_sampling.sampling.top_p = -1;
  EXPECT_FALSE(engine->Submit(bad_sampling, sink).ok());
  EXPECT_EQ(sink->num_done(), 0);  // errors at once, the sink untouched
  auto slot_err = engine->SaveSlot(7, "/nonexistent");
  EXPECT_EQ(slot_err.status().reason(), "slot_out_of_range");
  engine->Shutdown();
  auto after = engine->Submit(Greedy(Tokens("Hi"), 4), sink);
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}

TEST_F(EngineBatchingTest, ShutdownCancelsRunningAndQueued) {
  auto engine = Start(Options(1));
  auto running = std::make_shared<RecordingSink>();
  auto queued = std::make_shared<RecordingSink>();
  std::promise<void> started;
  running->OnEachToken([&](size_t n) {
    if (n == 1) started.set_value();
  });
  CompletionParams p = Greedy(Tokens("Once upon a time"), 400, 0);
  p.ignore_eos = true;
  ASSERT_TRUE(engine->Submit(p, running).ok());
  ASSERT_TRUE(engine->Submit(Greedy(Tokens("The dog"), 5, 0), queued).ok());
  started.get_future().wait();
  engine->Shutdown();
  EXPECT_EQ(running->num_done(), 1);
  EXPECT_EQ(queued->num_done(), 1);
  EXPECT_EQ(queued->Wait().status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace kvault
