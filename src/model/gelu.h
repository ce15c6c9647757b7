// GELU as ggml's CPU backend computes it for gemma's FFN
// (ggml_vec_geglu_f32 with GGML_GELU_FP16): the tanh approximation
// evaluated once per fp16 value into a table, looked up at the input
// rounded to fp16; inputs <= -10 give 0 and inputs >= 10 pass through.
#ifndef KVAULT_MODEL_GELU_H_
#define KVAULT_MODEL_GELU_H_

#include <cstdint>

namespace kvault {

// Returns ggml's gelu(x) of a single value (the table's lookup).
float GeluFp16Table(float x);

// out[i] = gelu(gate[i]) * up[i] for i < n; `out` may alias gate or up.
void GeGlu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace kvault

#endif  // KVAULT_MODEL_GELU_H_
