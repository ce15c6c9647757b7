// The cost of grammar-constrained generation: tg runs in which every step
// samples the next token with llama-server's default sampler chain and
// feeds it back, once without a grammar and once with one, alternating in
// the same process (same model, cache, threads and seeds).
//
// A constrained run that reaches the end of a sentence (the grammar is
// complete and the sampler picks end-of-generation) starts the grammar
// again and goes on decoding, so every run decodes exactly num_gen tokens
// and the two rates compare like for like.
#ifndef KVAULT_BENCH_SCENARIOS_GRAMMAR_BENCH_H_
#define KVAULT_BENCH_SCENARIOS_GRAMMAR_BENCH_H_

#include <cstdint>
#include <string>

#include "core/mapped_file.h"
#include "core/status_or.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct GrammarBenchOptions {
  std::string model_path;
  std::string grammar_path;  // a GBNF file
  uint32_t num_gen = 128;    // sampled decode steps per run
  uint32_t threads = 2;      // compute threads, the caller included
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  uint32_t reps = 5;         // run pairs after one warm-up pair
  uint64_t seed = 1;         // run r samples with seed + r
  LoadMode load_mode = LoadMode::kRead;
};

struct GrammarBenchResult {
  std::string model;
  std::string grammar;
  uint32_t num_gen = 0;
  uint32_t threads = 0;
  uint32_t reps = 0;
  double plain_tok_s = 0;  // mean and sample stddev over the reps
  double plain_std = 0;
  double grammar_tok_s = 0;
  double grammar_std = 0;
  uint32_t num_sentences = 0;  // sentences completed in the timed runs
  std::string sample;          // the first timed constrained run's text
};

// Loads the model and the grammar, then alternates plain and constrained
// runs; an unreadable or invalid grammar is an error naming the file.
StatusOr<GrammarBenchResult> RunGrammarBench(const GrammarBenchOptions& o);

// The result as one JSON object (the fields above, tok/s as *_tok_s).
std::string GrammarBenchJson(const GrammarBenchResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_GRAMMAR_BENCH_H_
