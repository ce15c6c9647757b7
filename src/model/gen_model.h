// GenerateLlamaModel: writes a GGUF of a Llama-family architecture (any
// ArchSpec row: llama, qwen2, qwen3, phi3, gemma2, gemma3) with random weights,
// for tests, the demo model and benchmarks (`kvault gen-model`). Weights are
// normal(0, 0.02) and norm weights 1, from a PRNG of our own (xoshiro256**
// seeded per tensor via splitmix64, Box-Muller), so the bytes depend only
// on the options, not on the C++ library. Tensor names, shapes (ggml order,
// ne0 = input dim) and metadata keys are those llama.cpp's llama loader
// expects.
#ifndef KVAULT_MODEL_GEN_MODEL_H_
#define KVAULT_MODEL_GEN_MODEL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/status_or.h"
#include "model/ggml_types.h"
#include "model/quantize_plan.h"

namespace kvault {

inline constexpr char kGenModelByteVocab[] = "bytes";

struct GenModelOptions {
  std::string name = "kvault-random";  // general.name
  // general.architecture: a FindArchSpec name. Its spec decides the tensor
  // set (fused QKV, biases, q/k norms, post norms, a tied output for the
  // Gemmas) and the feature keys (soft-capping, sliding window).
  std::string arch = "llama";
  // Writes rope_freqs.weight with Llama 3.1's frequency divisors (arch
  // "llama" only).
  bool rope_freqs = false;
  // <arch>.attention.sliding_window for the sliding-window architectures;
  // 0: n_ctx / 4.
  uint32_t sliding_window = 0;
  uint32_t n_embd = 64;
  uint32_t n_layer = 2;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 0;  // 0: same as n_head
  uint32_t n_ff = 128;
  uint32_t n_ctx = 2048;
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  // Type of every 2-D weight matrix (token_embd and output included), like
  // llama-quantize --pure: f32, f16, bf16 or any type kvault quantizes
  // (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl,
  // iq4_xs); n_embd and n_ff must be multiples of its block size (32, or
  // 256 for the k types and iq4_xs). Norm weights are always f32.
  GgmlType type = GgmlType::kF32;
  // When set, replaces `type`: each matrix gets the type llama-quantize
  // chooses for this mix (e.g. Q4_K_M: q4_K, q6_K for output.weight and
  // some attn_v / ffn_down), with its fallbacks for rows that are not a
  // multiple of 256; the values are those of the f32 model, quantized.
  std::optional<QuantFileType> mix;
  // > 0: a Mixtral-style mixture-of-experts FFN (llama.expert_count):
  // n_expert experts of width n_ff in ffn_{gate,up,down}_exps, each token
  // routed to n_expert_used of them by ffn_gate_inp, which stays f32 (as
  // llama-quantize leaves it). 0: the dense FFN.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  // kGenModelByteVocab: a generated 259-token SentencePiece-style byte
  // vocab; otherwise the path of a GGUF whose tokenizer.* keys are copied.
  std::string vocab = kGenModelByteVocab;
  uint64_t seed = 0;
};

struct GenModelResult {
  uint32_t n_vocab = 0;
  uint64_t num_tensors = 0;
  uint64_t num_parameters = 0;
  uint64_t file_bytes = 0;
};

// Writes the model to `out` (neither synced nor closed). InvalidArgument
// for bad options (an unknown architecture, zero sizes, n_embd % n_head, n_head
// % n_head_kv, an odd head dim, expert counts llama.cpp refuses or that the
// architecture cannot have, a type kvault cannot write, n_embd / n_ff not
// multiples of the type's block size, or a mix whose type for some tensor has
// no fallback for its rows); errors of opening or reading the vocab GGUF.
StatusOr<GenModelResult> GenerateLlamaModel(const GenModelOptions& options,
                                            WritableFile* out);

// Writes the model to `path` durably: to "<path>.tmp" first, synced,
// closed, then renamed over `path`; the temporary is removed on failure.
StatusOr<GenModelResult> GenerateLlamaModelFile(Env* env,
                                                const GenModelOptions& options,
                                                const std::string& path);

// The generator's normal(0, 1) stream for `seed` and tensor `name`: exposed
// so tests can check its statistics. Fills `out`.
void FillStandardNormal(uint64_t seed, std::string_view name,
                        std::span<float> out);

}  // namespace kvault

#endif  // KVAULT_MODEL_GEN_MODEL_H_
