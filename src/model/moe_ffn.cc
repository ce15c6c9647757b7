#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvault {
namespace {

using ggml_compat::GgmlBuild;

// The float sum of one SIMD block of e^x values as the build's
// ggml_vec_soft_max_f32 reduces it: kAvx2's 8 lanes hi + lo, then (0 + 2)
// + (1 + 3); kAvx512's 16 as _mm512_reduce_add_ps: i + (i + 8), then
// i + (i + 4), then (0 + 2) + (1 + 3).
float ReduceBlock(const float* v, GgmlBuild build) {
  float t[4];
  if (build == GgmlBuild::kAvx512) {
    float h[8];
    for (int i = 0; i < 8; ++i) h[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; ++i) t[i] = h[i + 4] + h[i];
  } else {
    for (int i = 0; i < 4; ++i) t[i] = v[i + 4] + v[i];
  }
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// The weights of one token's chosen experts, normalised as
// build_moe_ffn's sum_rows (a double sum, rounded to float), clamp and
// div.
void NormalizeWeights(float* w, uint32_t n) {
  double sum = 0.0;
  for (uint32_t j = 0; j < n; ++j) sum += static_cast<double>(w[j]);
  const float kMinSum = 6.103515625e-5f;  // ggml's clamp: the least fp16
  const float total = std::max(static_cast<float>(sum), kMinSum);
  for (uint32_t j = 0; j < n; ++j) w[j] = w[j] / total;
}

// The rows (token * n_used + slot) routed to each of n_expert experts,
// in token then slot order.
std::vector<std::vector<uint32_t>> RowsPerExpert(const MoeRouting& routing,
                                                 size_t n_expert) {
  std::vector<std::vector<uint32_t>> rows(n_expert);
  for (size_t i = 0; i < routing.experts.size(); ++i) {
    rows[routing.experts[i]].push_back(static_cast<uint32_t>(i));
  }
  return rows;
}

// Scratch of one expert's rows.
struct ExpertScratch {
  std::vector<float> x, gate, up, down;
};

// Writes weight * FFN(x[row's token]) of every row in `rows` (all routed
// to `expert`) into slot_out [rows, n_embd].
void RunExpert(const ExpertWeights& expert, std::span<const uint32_t> rows,
               const MoeRouting& routing, const float* x, int64_t n_embd,
               const ComputeBackend& backend, ExpertScratch* s,
               float* slot_out) {
  const size_t m = rows.size();
  const int64_t n_ff = expert.gate.rows;
  s->x.resize(m * n_embd);
  for (size_t i = 0; i < m; ++i) {
    const float* src = x + (rows[i] / routing.n_used) * n_embd;
    std::copy(src, src + n_embd, &s->x[i * n_embd]);
  }
  // MUL_MAT_ID multiplies each row alone (vec_dot), whatever the batch.
  const std::vector<kernels::DotOrder> orders(m, kernels::DotOrder::kGemv);
  s->gate.resize(m * n_ff);
  s->up.resize(m * n_ff);
  backend.MatMul(expert.gate, s->x.data(), orders, s->gate.data());
  backend.MatMul(expert.up, s->x.data(), orders, s->up.data());
  for (size_t i = 0; i < m; ++i) {
    float* gate = &s->gate[i * n_ff];
    backend.SwiGlu(gate, &s->up[i * n_ff], n_ff, gate);
  }
  s->down.resize(m * n_embd);
  backend.MatMul(expert.down, s->gate.data(), orders, s->down.data());
  for (size_t i = 0; i < m; ++i) {
    const float w = routing.weights[rows[i]];
    float* dst = slot_out + size_t{rows[i]} * n_embd;
    for (int64_t c = 0; c < n_embd; ++c) dst[c] = s->down[i * n_embd + c] * w;
  }
}

}  // namespace

void GgmlSoftMax(const float* x, int64_t n, GgmlBuild build, float* y) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  const int64_t block = build == GgmlBuild::kAvx512 ? 16 : 8;
  double sum = 0.0;
  int64_t i = 0;
  for (; i + block <= n; i += block) {
    for (int64_t j = 0; j < block; ++j) {
      y[i + j] = ggml_compat::VExpf(x[i + j] - max, build);
    }
    sum += static_cast<double>(ReduceBlock(y + i, build));
  }
  for (; i < n; ++i) {
    const float v = std::exp(x[i] - max);
    sum += static_cast<double>(v);
    y[i] = v;
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= scale;
}

MoeRouting RouteTokens(std::span<const float> logits, uint32_t n_expert,
                       uint32_t n_used, GgmlBuild build) {
  const size_t num_tokens = logits.size() / n_expert;
  MoeRouting routing;
  routing.n_used = n_used;
  routing.experts.resize(num_tokens * n_used);
  routing.weights.resize(num_tokens * n_used);
  std::vector<float> probs(n_expert);
  std::vector<int32_t> order(n_expert);
  for (size_t t = 0; t < num_tokens; ++t) {
    GgmlSoftMax(&logits[t * n_expert], n_expert, build, probs.data());
    std::iota(order.begin(), order.end(), 0);
    // ggml's argsort: std::sort with this comparator, so ties (and the
    // order among equal probabilities) fall as llama.cpp's do.
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    int32_t* chosen = &routing.experts[t * n_used];
    float* weights = &routing.weights[t * n_used];
    for (uint32_t j = 0; j < n_used; ++j) {
      chosen[j] = order[j];
      weights[j] = probs[order[j]];
    }
    NormalizeWeights(weights, n_used);
  }
  return routing;
}

void RunExperts(std::span<const ExpertWeights> experts,
                const MoeRouting& routing, const float* x, size_t num_tokens,
                int64_t n_embd, const ComputeBackend& backend, float* out) {
  const uint32_t k = routing.n_used;
  std::vector<float> slot_out(num_tokens * k * n_embd);
  const std::vector<std::vector<uint32_t>> rows =
      RowsPerExpert(routing, experts.size());
  ExpertScratch scratch;
  for (size_t e = 0; e < experts.size(); ++e) {
    if (rows[e].empty()) continue;
    RunExpert(experts[e], rows[e], routing, x, n_embd, backend, &scratch,
              slot_out.data());
  }
  // build_moe_ffn's adds: slot 0, plus slot 1, plus slot 2, ...
  for (size_t t = 0; t < num_tokens; ++t) {
    const float* slots = &slot_out[t * k * n_embd];
    float* dst = out + t * n_embd;
    std::copy(slots, slots + n_embd, dst);
    for (uint32_t j = 1; j < k; ++j) {
      for (int64_t c = 0; c < n_embd; ++c) dst[c] += slots[j * n_embd + c];
    }
  }
}

}  // namespace kvault
