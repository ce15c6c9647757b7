// ArchSpec: what distinguishes the Llama-family architectures the forward
// pass runs, as data, so a new family is a table row rather than a new code
// path. Everything else (tensor names, SwiGLU FFN, RMSNorm, GQA) is shared.
#ifndef KVAULT_MODEL_ARCH_SPEC_H_
#define KVAULT_MODEL_ARCH_SPEC_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault {

// How RoPE pairs the dimensions of a head. kNormal rotates (x[2i], x[2i+1])
// (GGUF llama files: the converter permuted Q/K for it); kNeox rotates
// (x[i], x[i + n_rot/2]) (qwen2, qwen3 and most HF-native conversions).
enum class RopeStyle { kNormal, kNeox };

// Whether an architecture's FFN may be a mixture of experts
// (<arch>.expert_count > 0: a router picks expert_used_count of
// expert_count SwiGLU FFNs per token, see moe_ffn.h).
enum class MoeSupport {
  kNone,      // dense only; a file with experts is refused
  kOptional,  // dense or experts, by expert_count (llama: Mixtral)
  kRequired,  // experts only (qwen3moe)
};

struct ArchSpec {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kNormal;
  bool qkv_bias = false;  // attn_{q,k,v}.bias present (required)
  bool qk_norm = false;   // per-head RMSNorm attn_{q,k}_norm (required)
  bool tied_output_allowed = true;  // output.weight may be absent
  // rope_freqs.weight (Llama 3.1+ per-pair RoPE frequency divisors) may be
  // present; a file holding it for another architecture is refused.
  bool rope_freq_factors = false;
  // attn_qkv.weight holds the Q, K and V rows in that order (phi3).
  bool fused_qkv = false;
  // ffn_up.weight holds the gate rows, then the up rows (phi3's SwiGLU
  // over one [2 * n_ff] product).
  bool fused_gate_up = false;
  // Q is multiplied by 1 / sqrt(head_dim) before attention, which then
  // takes scale 1 (phi3's graph; the bits differ from scaling q . k when
  // the factor is not a power of two).
  bool scale_q = false;
  // gemma2: embeddings multiplied by sqrtf(n_embd); GELU (ggml's fp16
  // table) gates the FFN instead of SiLU; post_attention_norm and
  // post_ffw_norm RMS-normalise each block's output before the residual
  // add; attention and final logit soft-capping (LlamaHparams).
  bool embed_scale = false;
  bool gelu_ffn = false;
  bool post_norms = false;
  bool softcap = false;
  // > 0: layer il attends through a sliding window
  // (LlamaHparams::n_swa) when il % pattern < pattern - 1, the pattern
  // being <arch>.attention.sliding_window_pattern or this default.
  uint32_t swa_pattern = 0;
  // > 0: sliding-window layers rotate with this RoPE base and no frequency
  // scale (gemma3's local layers: 10000), the others with the file's.
  float swa_rope_freq_base = 0.0f;
  MoeSupport moe = MoeSupport::kNone;
  // The experts' FFN width is <arch>.expert_feed_forward_length (default
  // feed_forward_length / expert_used_count, as llama.cpp's qwen3moe),
  // else feed_forward_length itself (llama).
  bool expert_ff_length = false;
};

// Returns the spec of architecture `name`; Unimplemented naming it and the
// supported list when kvault has no row for it.
StatusOr<ArchSpec> FindArchSpec(std::string_view name);
// Returns every supported architecture.
std::span<const ArchSpec> AllArchSpecs();
// Returns the names of the features `spec` turns on, in declaration order
// (e.g. "neox rope", "qkv bias"); empty for plain llama.
std::vector<std::string> ArchFeatureNames(const ArchSpec& spec);

}  // namespace kvault

#endif  // KVAULT_MODEL_ARCH_SPEC_H_
