// The mixture-of-experts FFN of llama.cpp's build_moe_ffn (Mixtral, Qwen3
// MoE), reproduced operation for operation: a router (ffn_gate_inp) scores
// the experts, ggml's soft_max turns the scores into probabilities, a
// descending argsort picks the top expert_used_count, their probabilities
// divided by their sum weight the experts' SwiGLU FFNs, and the weighted
// outputs are added in slot order.
//
// The experts run grouped: each expert multiplies the rows of all the
// batch's tokens routed to it at once, in the single-token summation order
// (llama.cpp's MUL_MAT_ID takes one vec_dot per row whatever the batch), so
// a token's result depends on nothing but the token.
#ifndef KVAULT_MODEL_MOE_FFN_H_
#define KVAULT_MODEL_MOE_FFN_H_

#include <cstdint>
#include <span>
#include <vector>

#include "model/compute_backend.h"
#include "model/ggml_compat.h"
#include "model/llama_weights.h"

namespace kvault {

// Each token's chosen experts and their weights, [num_tokens, n_used]
// row-major: slot j of token t is entry t * n_used + j.
struct MoeRouting {
  uint32_t n_used = 0;
  std::vector<int32_t> experts;  // expert index, best first
  std::vector<float> weights;    // its weight
};

// ggml_soft_max of one row as `build` computes it: the max, then e^(x -
// max) by ggml_v_expf over whole SIMD blocks (16 values for kAvx512, 8 for
// kAvx2; each block's sum reduced as the build's vector code does) and
// libm's expf for the rest, summed in double, then times the float of
// 1 / sum. y may equal x.
void GgmlSoftMax(const float* x, int64_t n, ggml_compat::GgmlBuild build,
                 float* y);

// Routes every token: `logits` holds the router's [num_tokens, n_expert]
// scores. Picks each token's n_used most probable experts (std::sort of
// the indices by descending probability, ggml's argsort: ties keep its
// order) and weights them by their probabilities divided by the float of
// their double sum (at least 2^-14, ggml's clamp). Requires 0 < n_used <=
// n_expert and logits.size() a multiple of n_expert.
MoeRouting RouteTokens(std::span<const float> logits, uint32_t n_expert,
                       uint32_t n_used, ggml_compat::GgmlBuild build);

// out[t] = sum over token t's slots j, in order, of weights[t, j] times
// expert experts[t, j]'s down(swiglu(gate x[t], up x[t])). x and out:
// [num_tokens, n_embd] (distinct); `experts` as LayerWeights::experts.
void RunExperts(std::span<const ExpertWeights> experts,
                const MoeRouting& routing, const float* x, size_t num_tokens,
                int64_t n_embd, const ComputeBackend& backend, float* out);

}  // namespace kvault

#endif  // KVAULT_MODEL_MOE_FFN_H_
