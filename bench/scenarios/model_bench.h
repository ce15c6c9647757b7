// Forward-pass throughput with llama-bench's definitions:
//  * pp: one batch of `num_prompt` random valid token ids into a fresh
//    sequence (logits for the last token only), timed as one call;
//  * tg: `num_gen` single-token decode steps into a fresh sequence (each
//    with logits; the tokens are random, not sampled), timed together.
// Each figure is the mean of the per-run tokens/s over `reps` runs after
// one untimed warm-up run, with the sample standard deviation.
//
// With depth D (llama-bench's -d) the sequence first holds D cached tokens
// (prefilled once, untimed; each run drops what it added after them). With
// `fragmented` every other page of the pool is held by other sequences, so
// no two consecutive pages of the benchmarked sequence are adjacent in
// memory (the pool hands them out lowest first: ascending addresses).
#ifndef KVAULT_BENCH_SCENARIOS_MODEL_BENCH_H_
#define KVAULT_BENCH_SCENARIOS_MODEL_BENCH_H_

#include <cstdint>
#include <string>

#include "core/mapped_file.h"
#include "core/status_or.h"
#include "kv/kv_dtype.h"
#include "model/compute_backend.h"

namespace kvault::bench {

struct ModelBenchOptions {
  std::string model_path;
  uint32_t num_prompt = 512;  // pp tokens; 0 skips pp
  uint32_t num_gen = 128;     // tg steps; 0 skips tg
  uint32_t threads = 2;       // compute threads, the caller included
  // The kernel set and numerics the command took from the environment
  // (ComputeBackendOptions::FromEnvironment); `threads` is its thread
  // count.
  ComputeBackendOptions compute;
  uint32_t reps = 3;
  KvDtype cache_type = KvDtype::kF16;
  uint32_t page_size = 16;
  uint32_t depth = 0;       // cached tokens before each test
  bool fragmented = false;  // scatter the sequence's pages (see above)
  uint64_t seed = 1;  // for the random tokens and the page shuffle
  LoadMode load_mode = LoadMode::kRead;
};

struct ModelBenchResult {
  std::string model;  // the path
  uint64_t model_bytes = 0;   // LlamaModel::weight_bytes()
  uint64_t decode_bytes = 0;  // LlamaModel::decode_bytes()
  uint64_t num_parameters = 0;
  uint32_t num_prompt = 0;
  uint32_t num_gen = 0;
  uint32_t threads = 0;
  uint32_t reps = 0;
  uint32_t depth = 0;
  bool fragmented = false;
  bool mmap = false;  // the model was mapped, not read into memory
  std::string kernels;  // the kernel set that ran, e.g. "avx2"
  double pp_tok_s = 0;  // 0 when skipped
  double pp_std = 0;
  double tg_tok_s = 0;  // 0 when skipped
  double tg_std = 0;
};

// Loads the model, validates `options` and runs the measurements.
StatusOr<ModelBenchResult> RunModelBench(const ModelBenchOptions& options);

// Returns one JSON object with the keys model, model_bytes, decode_bytes,
// num_parameters, n_prompt, n_gen, depth, fragmented, mmap, reps, threads,
// kernels, pp_tok_s, pp_std, tg_tok_s, tg_std.
std::string ModelBenchJson(const ModelBenchResult& result);

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_MODEL_BENCH_H_
