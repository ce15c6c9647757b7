// The model a model-based scenario runs when no GGUF file is given: the
// "small" benchmark shape of docs/benchmarks.md, generated in memory.
#ifndef KVAULT_BENCH_SCENARIOS_BENCH_MODELS_H_
#define KVAULT_BENCH_SCENARIOS_BENCH_MODELS_H_

#include <memory>
#include <string>

#include "core/status_or.h"
#include "model/llama_model.h"

namespace kvault::bench {

// Loads `path`, or when it is empty generates the small shape (512 embd,
// 8 layers, 8 heads / 4 KV heads, 1408 ff, Q8_0, random weights), laid out
// for the kernels of `isa`.
StatusOr<std::unique_ptr<LlamaModel>> LoadModelOrSmall(
    const std::string& path, kernels::Isa isa = kernels::BestIsa());

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_BENCH_MODELS_H_
