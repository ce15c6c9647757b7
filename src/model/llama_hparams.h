// LlamaHparams: the typed hyperparameters of a Llama-family GGUF model,
// read from the "<general.architecture>." keys with the defaults llama.cpp
// applies when an optional key is absent, then validated so the forward
// pass can size buffers from them without further checks.
#ifndef KVAULT_MODEL_LLAMA_HPARAMS_H_
#define KVAULT_MODEL_LLAMA_HPARAMS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status_or.h"
#include "model/gguf_file.h"

namespace kvault {

// Limits kvault accepts; well above every released Llama-family model and
// low enough that products of them cannot overflow 64-bit sizes.
inline constexpr uint32_t kMaxEmbd = 1u << 16;
inline constexpr uint32_t kMaxLayers = 512;  // llama.cpp's LLAMA_MAX_LAYERS
inline constexpr uint32_t kMaxHeads = 1024;
inline constexpr uint32_t kMaxFeedForward = 1u << 20;
inline constexpr uint32_t kMaxContext = 1u << 24;
inline constexpr uint32_t kMaxVocab = 1u << 22;
inline constexpr uint32_t kMaxExperts = 512;  // llama.cpp's LLAMA_MAX_EXPERTS

enum class RopeScalingType { kNone, kLinear, kYarn, kLongrope };

// Returns "none", "linear", "yarn" or "longrope" (the GGUF spellings).
std::string_view RopeScalingTypeName(RopeScalingType type);

struct LlamaHparams {
  std::string architecture;    // general.architecture, e.g. "llama"
  uint32_t n_embd = 0;         // embedding_length
  uint32_t n_layer = 0;        // block_count
  uint32_t n_head = 0;         // attention.head_count
  uint32_t n_head_kv = 0;      // attention.head_count_kv
  uint32_t n_ff = 0;           // feed_forward_length
  uint32_t n_ctx_train = 0;    // context_length
  uint32_t n_embd_head_k = 0;  // attention.key_length
  uint32_t n_embd_head_v = 0;  // attention.value_length
  uint32_t n_rot = 0;          // rope.dimension_count
  uint32_t n_vocab = 0;        // tokens array, <arch>.vocab_size or token_embd
  float rope_freq_base = 10000.0f;  // rope.freq_base
  float rms_norm_eps = 0.0f;        // attention.layer_norm_rms_epsilon
  RopeScalingType rope_scaling_type = RopeScalingType::kLinear;
  float rope_scaling_factor = 0.0f;    // rope.scaling.factor; 0 = not given
  uint32_t rope_scaling_orig_ctx = 0;  // rope.scaling.original_context_length
  // ArchSpec::swa_pattern and ::softcap only (ReadArchHparams): the
  // sliding window and the soft-caps; 0 = none.
  uint32_t n_swa = 0;          // attention.sliding_window
  uint32_t swa_pattern = 0;    // attention.sliding_window_pattern
  float attn_softcap = 0.0f;   // attn_logit_softcapping
  float final_softcap = 0.0f;  // final_logit_softcapping
  // A mixture-of-experts FFN (ArchSpec::moe): expert_count, expert_used_count
  // and one expert's FFN width (ReadArchHparams); all 0 for a dense FFN.
  uint32_t n_expert = 0;       // expert_count
  uint32_t n_expert_used = 0;  // expert_used_count
  uint32_t n_ff_exp = 0;       // expert_feed_forward_length or n_ff

  // Returns 1 / rope_scaling_factor, or 1 when no factor was given (the
  // frequency scale llama.cpp derives).
  float rope_freq_scale() const;
  // Returns n_head / n_head_kv (queries per KV head).
  uint32_t n_gqa() const { return n_head / n_head_kv; }
  // Returns the K row width of one token in one layer: n_embd_head_k *
  // n_head_kv.
  uint32_t n_embd_k_gqa() const { return n_embd_head_k * n_head_kv; }
  // Returns the V row width: n_embd_head_v * n_head_kv.
  uint32_t n_embd_v_gqa() const { return n_embd_head_v * n_head_kv; }
  // Returns a one-line summary ("n_embd=64 n_layer=5 ...").
  std::string ToString() const;
};

// Reads and validates the hyperparameters of `file`. NotFound names a
// missing required key; InvalidArgument names a key of the wrong type or a
// value that fails validation (zero, over a limit, not divisible);
// Unimplemented for per-layer arrays whose values differ.
StatusOr<LlamaHparams> ReadLlamaHparams(const GgufFile& file);

// Checks the invariants ReadLlamaHparams guarantees (non-zero sizes within
// the limits, n_embd_head * n_head consistency, n_head % n_head_kv == 0,
// n_rot even and <= n_embd_head_k, eps and freq_base positive and finite,
// 0 < n_expert_used <= n_expert <= kMaxExperts or both 0).
Status ValidateLlamaHparams(const LlamaHparams& hparams);

}  // namespace kvault

#endif  // KVAULT_MODEL_LLAMA_HPARAMS_H_
