// Models generated in memory: the server's embedded demo model and the
// small models benchmarks use when no file is given.
#ifndef KVAULT_MODEL_DEMO_MODEL_H_
#define KVAULT_MODEL_DEMO_MODEL_H_

#include <memory>

#include "core/status_or.h"
#include "model/gen_model.h"
#include "model/llama_model.h"

namespace kvault {

// Returns the demo model's options: random F16 weights, byte vocabulary,
// n_embd 256, 4 layers, 8 heads / 4 KV heads, context 4096.
GenModelOptions DemoModelOptions();

// Generates the GGUF image of `options` in memory and loads it.
StatusOr<std::unique_ptr<LlamaModel>> GenerateModelInMemory(
    const GenModelOptions& options);

}  // namespace kvault

#endif  // KVAULT_MODEL_DEMO_MODEL_H_
