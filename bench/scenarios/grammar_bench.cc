#include "bench/scenarios/grammar_bench.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "bench/scenarios/mean_std.h"
#include "grammar/grammar.h"
#include "kv/kv_cache.h"
#include "model/inference.h"
#include "model/llama_model.h"
#include "model/sampler.h"
#include "model/sampler_grammar.h"
#include "model/sampler_vocab.h"

namespace kvault::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr SeqId kBenchSeq{0};

// What one sampled run needs; `grammar` null for the plain runs.
struct SampledRun {
  const LlamaModel* model;
  InferenceContext* ctx;
  KvCache* cache;
  const SamplerVocab* vocab;
  const TokenTrie* trie;
  std::shared_ptr<const Grammar> grammar;
};

struct RunOutcome {
  double seconds = 0;
  uint32_t sentences = 0;
  std::vector<TokenId> tokens;
};

std::unique_ptr<Sampler> MakeSampler(const SampledRun& run, uint64_t seed) {
  SamplingParams p;  // llama-server's defaults
  p.seed = seed;
  p.grammar = run.grammar;
  SamplerContext c;
  c.vocab = run.vocab;
  c.grammar_trie = run.trie;
  return std::make_unique<Sampler>(p, c);
}

// Decodes `num_gen` tokens from BOS, each the sampler's pick from the last
// logits; a completed sentence restarts the grammar.
StatusOr<RunOutcome> RunSampled(const SampledRun& run, uint32_t num_gen,
                                uint64_t seed) {
  KV_RETURN_IF_ERROR(run.cache->RemoveRange(kBenchSeq, 0, INT32_MAX));
  const Vocab& v = run.model->tokenizer().vocab();
  TokenId next = v.bos.value_or(0);
  RunOutcome out;
  std::unique_ptr<Sampler> sampler = MakeSampler(run, seed);
  const Clock::time_point start = Clock::now();
  for (uint32_t i = 0; i < num_gen; ++i) {
    const BatchToken one{kBenchSeq, next, static_cast<Pos>(i), true};
    KV_ASSIGN_OR_RETURN(std::vector<float> logits,
                        run.ctx->Decode(std::span(&one, 1)));
    next = sampler->Sample(logits);
    if (run.grammar != nullptr && run.vocab->IsEndOfGeneration(next)) {
      ++out.sentences;
      sampler = MakeSampler(run, seed + i);
    } else {
      sampler->AcceptGenerated(next);
    }
    out.tokens.push_back(next);
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

StatusOr<std::shared_ptr<const Grammar>> LoadGrammar(const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::string text,
                      ReadFileToString(Env::Default(), path));
  StatusOr<Grammar> g = Grammar::Parse(text);
  if (!g.ok()) return g.status().WithContext("grammar file " + path);
  return std::make_shared<const Grammar>(std::move(*g));
}

}  // namespace

StatusOr<GrammarBenchResult> RunGrammarBench(const GrammarBenchOptions& o) {
  if (o.num_gen == 0 || o.reps == 0 || o.threads == 0) {
    return InvalidArgumentError("num_gen, reps and threads must be >= 1");
  }
  KV_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar,
                      LoadGrammar(o.grammar_path));
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.threads;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                      LlamaModel::Load(o.model_path, o.load_mode, compute.isa));
  KvCacheOptions co;
  co.page_size = 16;
  co.num_pages = (o.num_gen + 15) / 16;
  co.layout = model->KvLayoutFor(KvDtype::kF16);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(co));
  InferenceContext ctx(model.get(), cache.get(), compute);
  TokenizerSamplerVocab vocab(&model->tokenizer());
  const std::unique_ptr<TokenTrie> trie = BuildGrammarTrie(vocab);
  const SampledRun plain{model.get(), &ctx, cache.get(), &vocab, trie.get(),
                         nullptr};
  SampledRun constrained = plain;
  constrained.grammar = grammar;

  GrammarBenchResult r;
  r.model = o.model_path;
  r.grammar = o.grammar_path;
  r.num_gen = o.num_gen;
  r.threads = o.threads;
  r.reps = o.reps;
  std::vector<double> plain_rates, grammar_rates;
  for (uint32_t rep = 0; rep <= o.reps; ++rep) {  // rep 0: warm-up
    KV_ASSIGN_OR_RETURN(RunOutcome a, RunSampled(plain, o.num_gen, o.seed + rep));
    KV_ASSIGN_OR_RETURN(RunOutcome b,
                        RunSampled(constrained, o.num_gen, o.seed + rep));
    if (rep == 0) continue;
    plain_rates.push_back(o.num_gen / a.seconds);
    grammar_rates.push_back(o.num_gen / b.seconds);
    r.num_sentences += b.sentences;
    if (rep == 1) r.sample = model->tokenizer().Detokenize(b.tokens);
  }
  MeanStd(plain_rates, &r.plain_tok_s, &r.plain_std);
  MeanStd(grammar_rates, &r.grammar_tok_s, &r.grammar_std);
  return r;
}

std::string GrammarBenchJson(const GrammarBenchResult& r) {
  nlohmann::json j = {{"model", r.model},
                      {"grammar", r.grammar},
                      {"n_gen", r.num_gen},
                      {"threads", r.threads},
                      {"reps", r.reps},
                      {"plain_tok_s", r.plain_tok_s},
                      {"plain_std", r.plain_std},
                      {"grammar_tok_s", r.grammar_tok_s},
                      {"grammar_std", r.grammar_std},
                      {"sentences", r.num_sentences},
                      {"sample", r.sample}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvault::bench
