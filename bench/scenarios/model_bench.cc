#include "bench/scenarios/model_bench.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/scenarios/mean_std.h"
#include "kv/kv_cache.h"
#include "model/inference.h"
#include "model/llama_model.h"

namespace kvault::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr SeqId kBenchSeq{0};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Status Validate(const ModelBenchOptions& o) {
  if (o.model_path.empty()) return InvalidArgumentError("no model path");
  if (o.num_prompt == 0 && o.num_gen == 0) {
    return InvalidArgumentError("both num_prompt and num_gen are 0");
  }
  if (o.threads == 0 || o.reps == 0 || o.page_size == 0) {
    return InvalidArgumentError("threads, reps and page_size must be >= 1");
  }
  return Status::Ok();
}

// Random valid ids; the first is BOS when the vocabulary adds one (as
// llama-bench does).
std::vector<TokenId> RandomTokens(const LlamaModel& model, uint32_t n,
                                  std::mt19937_64* rng) {
  const Vocab& vocab = model.tokenizer().vocab();
  std::vector<TokenId> ids(n);
  for (TokenId& id : ids) {
    id = static_cast<TokenId>((*rng)() % model.n_vocab());
  }
  if (n > 0 && vocab.add_bos && vocab.bos) ids[0] = *vocab.bos;
  return ids;
}

// The positions a run adds start at `depth`; a run first drops what the
// previous one added.
struct RunContext {
  InferenceContext* ctx;
  KvCache* cache;
  Pos depth;
};

// One pp run: the whole prompt in one Decode; returns its seconds.
StatusOr<double> RunPrompt(const RunContext& rc,
                           std::span<const TokenId> tokens) {
  KV_RETURN_IF_ERROR(rc.cache->RemoveRange(kBenchSeq, rc.depth, INT32_MAX));
  std::vector<BatchToken> batch(tokens.size());  // [num_prompt]
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch[i] = {kBenchSeq, tokens[i], rc.depth + static_cast<Pos>(i),
                i + 1 == tokens.size()};
  }
  const Clock::time_point start = Clock::now();
  KV_ASSIGN_OR_RETURN(std::vector<float> logits, rc.ctx->Decode(batch));
  return SecondsSince(start);
}

// One tg run: one Decode per token; returns the seconds of all of them.
StatusOr<double> RunGen(const RunContext& rc,
                        std::span<const TokenId> tokens) {
  KV_RETURN_IF_ERROR(rc.cache->RemoveRange(kBenchSeq, rc.depth, INT32_MAX));
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const BatchToken one{kBenchSeq, tokens[i], rc.depth + static_cast<Pos>(i),
                         true};
    KV_ASSIGN_OR_RETURN(std::vector<float> logits,
                        rc.ctx->Decode(std::span(&one, 1)));
  }
  return SecondsSince(start);
}

// Fills the pool with one-page filler sequences, then frees the even
// pages (in shuffled order, which the pool's lowest-first allocation
// undoes): every free page sits between used ones, so the sequence holds
// every other page, in ascending order.
Status FragmentPool(KvCache* cache, std::mt19937_64* rng) {
  const uint32_t page_size = cache->pool().page_size();
  std::vector<TokenPos> page(page_size);
  for (uint32_t i = 0; i < page_size; ++i) page[i].pos = static_cast<Pos>(i);
  std::vector<SeqId> holes;
  for (uint32_t i = 0; i < cache->pool().num_pages(); ++i) {
    const SeqId filler(kBenchSeq.value() + 1 + i);
    KV_ASSIGN_OR_RETURN(std::vector<CellId> cells, cache->Append(filler, page));
    if (cells[0].value() / page_size % 2 == 0) holes.push_back(filler);
  }
  for (size_t i = holes.size(); i > 1; --i) {  // Fisher-Yates, own draw
    std::swap(holes[i - 1], holes[(*rng)() % i]);
  }
  for (SeqId seq : holes) cache->RemoveSequence(seq);
  return Status::Ok();
}

// Builds the cache: room for depth + the longest test, twice that when
// fragmented (half the pages stay with the fillers).
StatusOr<std::unique_ptr<KvCache>> MakeCache(const LlamaModel& model,
                                             const ModelBenchOptions& o,
                                             std::mt19937_64* rng) {
  const uint64_t cells = uint64_t{o.depth} + std::max(o.num_prompt, o.num_gen);
  uint64_t pages = (cells + o.page_size - 1) / o.page_size;
  if (o.fragmented) pages = 2 * pages + 1;
  KvCacheOptions options;
  options.page_size = o.page_size;
  options.num_pages = static_cast<uint32_t>(pages);
  options.layout = model.KvLayoutFor(o.cache_type);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      KvCache::Create(options));
  if (o.fragmented) KV_RETURN_IF_ERROR(FragmentPool(cache.get(), rng));
  return cache;
}

// Runs `run` once untimed, then reps times; fills mean/std of tok/s.
template <typename Run>
Status Measure(uint32_t reps, uint32_t num_tokens, const Run& run,
               double* mean, double* std) {
  KV_RETURN_IF_ERROR(run().status());
  std::vector<double> tok_s;
  for (uint32_t r = 0; r < reps; ++r) {
    KV_ASSIGN_OR_RETURN(double seconds, run());
    tok_s.push_back(num_tokens / seconds);
  }
  MeanStd(tok_s, mean, std);
  return Status::Ok();
}

}  // namespace

StatusOr<ModelBenchResult> RunModelBench(const ModelBenchOptions& o) {
  KV_RETURN_IF_ERROR(Validate(o));
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.threads;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                      LlamaModel::Load(o.model_path, o.load_mode, compute.isa));
  std::mt19937_64 rng(o.seed);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      MakeCache(*model, o, &rng));
  InferenceContext ctx(model.get(), cache.get(), compute);
  const RunContext rc{&ctx, cache.get(), static_cast<Pos>(o.depth)};
  if (o.depth > 0) {  // the cached context every run starts from
    KV_RETURN_IF_ERROR(RunPrompt({&ctx, cache.get(), 0},
                                 RandomTokens(*model, o.depth, &rng))
                           .status());
  }

  ModelBenchResult r;
  r.model = o.model_path;
  r.model_bytes = model->weight_bytes();
  r.decode_bytes = model->decode_bytes();
  r.num_parameters = model->num_parameters();
  r.num_prompt = o.num_prompt;
  r.num_gen = o.num_gen;
  r.threads = o.threads;
  r.reps = o.reps;
  r.depth = o.depth;
  r.fragmented = o.fragmented;
  r.mmap = o.load_mode == LoadMode::kMmap;
  r.kernels = std::string(kernels::IsaName(compute.isa));
  if (o.num_prompt > 0) {
    const std::vector<TokenId> prompt =
        RandomTokens(*model, o.num_prompt, &rng);
    KV_RETURN_IF_ERROR(Measure(
        o.reps, o.num_prompt, [&] { return RunPrompt(rc, prompt); },
        &r.pp_tok_s, &r.pp_std));
  }
  if (o.num_gen > 0) {
    const std::vector<TokenId> gen = RandomTokens(*model, o.num_gen, &rng);
    KV_RETURN_IF_ERROR(Measure(o.reps, o.num_gen,
                               [&] { return RunGen(rc, gen); }, &r.tg_tok_s,
                               &r.tg_std));
  }
  return r;
}

std::string ModelBenchJson(const ModelBenchResult& r) {
  nlohmann::json j = {{"model", r.model},
                      {"model_bytes", r.model_bytes},
                      {"decode_bytes", r.decode_bytes},
                      {"num_parameters", r.num_parameters},
                      {"n_prompt", r.num_prompt},
                      {"n_gen", r.num_gen},
                      {"depth", r.depth},
                      {"fragmented", r.fragmented},
                      {"mmap", r.mmap},
                      {"reps", r.reps},
                      {"threads", r.threads},
                      {"kernels", r.kernels},
                      {"pp_tok_s", r.pp_tok_s},
                      {"pp_std", r.pp_std},
                      {"tg_tok_s", r.tg_tok_s},
                      {"tg_std", r.tg_std}};
  return j.dump();
}

}  // namespace kvault::bench
