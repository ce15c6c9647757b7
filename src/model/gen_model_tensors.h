// The tensor set GenerateLlamaModel writes for an architecture: names,
// shapes and how each tensor's values are made (internal to gen_model).
#ifndef KVAULT_MODEL_GEN_MODEL_TENSORS_H_
#define KVAULT_MODEL_GEN_MODEL_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch_spec.h"
#include "model/gen_model.h"
#include "model/ggml_types.h"

namespace kvault::gen_model_internal {

// How a tensor's values are made.
enum class Fill : uint8_t {
  kNormal,       // normal(0, 0.02): matrices and biases
  kOnes,         // norm weights
  kRopeFactors,  // Llama 3.1's RoPE frequency divisors
};

struct TensorPlan {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> shape;  // ggml order: ne0 = input dim
  Fill fill = Fill::kNormal;
};

// Returns the tensors llama.cpp's loader expects for `spec` with the
// options' sizes, in convert_hf_to_gguf order. Requires valid options.
std::vector<TensorPlan> PlanTensors(const GenModelOptions& o,
                                    const ArchSpec& spec, uint32_t n_kv,
                                    uint32_t n_vocab);

// Returns Llama 3.1's RoPE frequency divisor for dimension pair i of
// n_pairs (its published scaling: factor 8, low/high frequency factors 1
// and 4, an original context of 8192): 1 for short wavelengths, 8 for long
// ones, interpolated between.
float RopeFactor(uint64_t i, uint64_t n_pairs, float freq_base);

// Returns whether `spec`'s checkpoints tie the output projection to the
// token embeddings (no output.weight).
bool TiesOutput(const ArchSpec& spec);

}  // namespace kvault::gen_model_internal

#endif  // KVAULT_MODEL_GEN_MODEL_TENSORS_H_
