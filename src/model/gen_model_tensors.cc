#include "model/gen_model_tensors.h"

#include <cmath>
#include <numbers>

namespace kvault::gen_model_internal {
namespace {

// One block's attention tensors for `spec`, in convert_hf_to_gguf order.
void PlanAttention(const GenModelOptions& o, const ArchSpec& spec, uint64_t kv,
                   const std::string& p, std::vector<TensorPlan>* plan) {
  const uint64_t e = o.n_embd;
  const uint64_t head_dim = o.n_embd / o.n_head;
  if (spec.fused_qkv) {
    plan->push_back({p + "attn_qkv.weight", o.type, {e, e + 2 * kv}});
  } else {
    plan->push_back({p + "attn_q.weight", o.type, {e, e}});
    plan->push_back({p + "attn_k.weight", o.type, {e, kv}});
    plan->push_back({p + "attn_v.weight", o.type, {e, kv}});
  }
  if (spec.qkv_bias) {
    plan->push_back({p + "attn_q.bias", GgmlType::kF32, {e}});
    plan->push_back({p + "attn_k.bias", GgmlType::kF32, {kv}});
    plan->push_back({p + "attn_v.bias", GgmlType::kF32, {kv}});
  }
  if (spec.qk_norm) {
    plan->push_back(
        {p + "attn_q_norm.weight", GgmlType::kF32, {head_dim}, Fill::kOnes});
    plan->push_back(
        {p + "attn_k_norm.weight", GgmlType::kF32, {head_dim}, Fill::kOnes});
  }
  plan->push_back({p + "attn_output.weight", o.type, {e, e}});
  if (spec.post_norms) {
    plan->push_back(
        {p + "post_attention_norm.weight", GgmlType::kF32, {e}, Fill::kOnes});
  }
}

// One block's feed-forward tensors for `spec`.
void PlanFeedForward(const GenModelOptions& o, const ArchSpec& spec,
                     const std::string& p, std::vector<TensorPlan>* plan) {
  const uint64_t e = o.n_embd;
  plan->push_back({p + "ffn_norm.weight", GgmlType::kF32, {e}, Fill::kOnes});
  if (o.n_expert > 0) {
    // The router stays f32, as llama-quantize leaves it.
    const uint64_t x = o.n_expert;
    plan->push_back({p + "ffn_gate_inp.weight", GgmlType::kF32, {e, x}});
    plan->push_back({p + "ffn_gate_exps.weight", o.type, {e, o.n_ff, x}});
    plan->push_back({p + "ffn_down_exps.weight", o.type, {o.n_ff, e, x}});
    plan->push_back({p + "ffn_up_exps.weight", o.type, {e, o.n_ff, x}});
  } else if (spec.fused_gate_up) {
    plan->push_back({p + "ffn_up.weight", o.type, {e, 2 * uint64_t{o.n_ff}}});
    plan->push_back({p + "ffn_down.weight", o.type, {o.n_ff, e}});
  } else {
    plan->push_back({p + "ffn_gate.weight", o.type, {e, o.n_ff}});
    plan->push_back({p + "ffn_down.weight", o.type, {o.n_ff, e}});
    plan->push_back({p + "ffn_up.weight", o.type, {e, o.n_ff}});
  }
  if (spec.post_norms) {
    plan->push_back(
        {p + "post_ffw_norm.weight", GgmlType::kF32, {e}, Fill::kOnes});
  }
}

}  // namespace

// Gemma checkpoints tie the output projection to the token embeddings.
bool TiesOutput(const ArchSpec& spec) { return spec.embed_scale; }

std::vector<TensorPlan> PlanTensors(const GenModelOptions& o,
                                    const ArchSpec& spec, uint32_t n_kv,
                                    uint32_t n_vocab) {
  const uint64_t e = o.n_embd;
  const uint64_t kv = uint64_t{n_kv} * (o.n_embd / o.n_head);
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", o.type, {e, n_vocab}});
  if (o.rope_freqs) {
    plan.push_back({"rope_freqs.weight",
                    GgmlType::kF32,
                    {o.n_embd / o.n_head / 2},
                    Fill::kRopeFactors});
  }
  for (uint32_t l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    plan.push_back({p + "attn_norm.weight", GgmlType::kF32, {e}, Fill::kOnes});
    PlanAttention(o, spec, kv, p, &plan);
    PlanFeedForward(o, spec, p, &plan);
  }
  plan.push_back({"output_norm.weight", GgmlType::kF32, {e}, Fill::kOnes});
  if (!TiesOutput(spec)) {
    plan.push_back({"output.weight", o.type, {e, n_vocab}});
  }
  return plan;
}

float RopeFactor(uint64_t i, uint64_t n_pairs, float freq_base) {
  const double freq = std::pow(freq_base, -static_cast<double>(i) / n_pairs);
  const double wavelen = 2.0 * std::numbers::pi / freq;
  constexpr double kOriginal = 8192, kFactor = 8, kLow = 1, kHigh = 4;
  if (wavelen < kOriginal / kHigh) return 1.0f;
  if (wavelen > kOriginal / kLow) return static_cast<float>(kFactor);
  const double smooth = (kOriginal / wavelen - kLow) / (kHigh - kLow);
  return static_cast<float>(1.0 / ((1.0 - smooth) / kFactor + smooth));
}

}  // namespace kvault::gen_model_internal
