// LlamaWeights: views of a Llama-family model's tensors inside the mapped
// GGUF file, checked once at load (name, shape, type) so the forward pass
// indexes them without further checks. Matrices stay in the file (zero
// copy); the small 1-D tensors (norms, biases) are dequantized to f32.
#ifndef KVAULT_MODEL_LLAMA_WEIGHTS_H_
#define KVAULT_MODEL_LLAMA_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "core/status_or.h"
#include "model/arch_spec.h"
#include "model/gguf_file.h"
#include "model/kernels/kernels.h"
#include "model/llama_hparams.h"

namespace kvault {

// One expert of a mixture-of-experts FFN: a SwiGLU FFN of width
// LlamaHparams::n_ff_exp, its matrices slices of the layer's 3-D
// ffn_{gate,up,down}_exps tensors.
struct ExpertWeights {
  kernels::MatrixView gate;  // [n_ff_exp, n_embd]
  kernels::MatrixView up;    // [n_ff_exp, n_embd]
  kernels::MatrixView down;  // [n_embd, n_ff_exp]
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  kernels::MatrixView wq;             // [n_head * head_dim_k rows, n_embd cols]
  kernels::MatrixView wk;             // [n_head_kv * head_dim_k, n_embd]
  kernels::MatrixView wv;             // [n_head_kv * head_dim_v, n_embd]
  kernels::MatrixView wo;             // [n_embd, n_head * head_dim_v]
  std::vector<float> bq, bk, bv;      // biases (ArchSpec::qkv_bias), else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] (ArchSpec::qk_norm)
  std::vector<float> post_attn_norm;  // [n_embd] (ArchSpec::post_norms)
  std::vector<float> ffn_norm;        // [n_embd]
  std::vector<float> post_ffn_norm;   // [n_embd] (ArchSpec::post_norms)
  kernels::MatrixView w_gate;         // [n_ff, n_embd]
  kernels::MatrixView w_up;           // [n_ff, n_embd]
  kernels::MatrixView w_down;         // [n_embd, n_ff]
  // A mixture-of-experts FFN (LlamaHparams::n_expert > 0) instead of
  // w_gate, w_up and w_down (then empty views).
  kernels::MatrixView gate_inp;        // [n_expert, n_embd] router
  std::vector<ExpertWeights> experts;  // [n_expert]
};

struct LlamaWeights {
  // token_embd: n_vocab rows of n_embd values, any supported type; rows
  // are dequantized one per token.
  kernels::MatrixView token_embd;
  std::vector<float> output_norm;  // [n_embd]
  // [n_vocab, n_embd]; token_embd itself when output.weight is absent.
  kernels::MatrixView output;
  bool output_tied = false;
  // [n_rot / 2] RoPE frequency divisors (rope_freqs.weight), else empty.
  std::vector<float> rope_freqs;
  std::vector<LayerWeights> layers;  // [n_layer]
};

// Returns OK when matrices of `type` can be multiplied (every type the
// ggml type table marks supported_for_compute), else Unimplemented naming
// the type, `tensor_name` and the supported types.
Status CheckMatrixTypeSupported(GgmlType type, std::string_view tensor_name);

// Builds the views for `file` (which must outlive the result). NotFound
// names a missing tensor; InvalidArgument names a tensor whose shape is not
// the one `hparams` implies (expected vs actual); Unimplemented names a
// tensor of a type kvault cannot compute with.
StatusOr<LlamaWeights> LoadLlamaWeights(const GgufFile& file,
                                        const LlamaHparams& hparams,
                                        const ArchSpec& arch);

}  // namespace kvault

#endif  // KVAULT_MODEL_LLAMA_WEIGHTS_H_
