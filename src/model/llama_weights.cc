#include "model/llama_weights.h"

#include <cmath>
#include <string>

#include "model/quantize.h"

namespace kvault {
namespace {

std::string ShapeString(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

// Returns the tensor `name` after checking its shape is `expected` (ggml
// order, ne0 first).
StatusOr<const GgufTensorInfo*> FindShaped(
    const GgufFile& file, const std::string& name,
    const std::vector<uint64_t>& expected) {
  const GgufTensorInfo* info = file.FindTensor(name);
  if (info == nullptr) return NotFoundError("tensor " + name + " is missing");
  std::vector<uint64_t> actual = info->shape;
  // ggml treats trailing dimensions of 1 as absent.
  while (actual.size() > expected.size() && actual.back() == 1) {
    actual.pop_back();
  }
  if (actual != expected) {
    return InvalidArgumentError("tensor " + name + " has shape " +
                                ShapeString(info->shape) + ", expected " +
                                ShapeString(expected));
  }
  return info;
}

StatusOr<kernels::MatrixView> LoadMatrix(const GgufFile& file,
                                         const std::string& name, uint64_t cols,
                                         uint64_t rows) {
  KV_ASSIGN_OR_RETURN(const GgufTensorInfo* info,
                      FindShaped(file, name, {cols, rows}));
  KV_RETURN_IF_ERROR(CheckMatrixTypeSupported(info->type, name));
  kernels::MatrixView view;
  view.type = info->type;
  view.rows = static_cast<int64_t>(rows);
  view.cols = static_cast<int64_t>(cols);
  view.data = file.TensorData(*info).data();
  view.row_bytes = info->size_bytes / rows;
  return view;
}

StatusOr<std::vector<float>> LoadVector(const GgufFile& file,
                                        const std::string& name,
                                        uint64_t size) {
  KV_ASSIGN_OR_RETURN(const GgufTensorInfo* info,
                      FindShaped(file, name, {size}));
  std::vector<float> out(size);
  Status status = DequantizeRow(info->type, file.TensorData(*info), out);
  if (!status.ok()) return status.WithContext("tensor " + name);
  return out;
}

// Rows [first, first + rows) of `m`: a fused tensor's part, multiplied
// row by row as the whole would be, so the results are the same bits.
kernels::MatrixView RowRange(kernels::MatrixView m, uint64_t first,
                             uint64_t rows) {
  m.data += first * m.row_bytes;
  m.rows = static_cast<int64_t>(rows);
  return m;
}

// wq, wk and wv: separate tensors, or the row ranges of attn_qkv.weight.
Status LoadQkv(const GgufFile& file, const LlamaHparams& h,
               const ArchSpec& arch, const std::string& p, LayerWeights* w) {
  const uint64_t q_dim = uint64_t{h.n_head} * h.n_embd_head_k;
  const uint64_t k_dim = h.n_embd_k_gqa();
  const uint64_t v_dim = h.n_embd_v_gqa();
  if (arch.fused_qkv) {
    KV_ASSIGN_OR_RETURN(kernels::MatrixView qkv,
                        LoadMatrix(file, p + "attn_qkv.weight", h.n_embd,
                                   q_dim + k_dim + v_dim));
    w->wq = RowRange(qkv, 0, q_dim);
    w->wk = RowRange(qkv, q_dim, k_dim);
    w->wv = RowRange(qkv, q_dim + k_dim, v_dim);
    return Status::Ok();
  }
  KV_ASSIGN_OR_RETURN(w->wq,
                      LoadMatrix(file, p + "attn_q.weight", h.n_embd, q_dim));
  KV_ASSIGN_OR_RETURN(w->wk,
                      LoadMatrix(file, p + "attn_k.weight", h.n_embd, k_dim));
  KV_ASSIGN_OR_RETURN(w->wv,
                      LoadMatrix(file, p + "attn_v.weight", h.n_embd, v_dim));
  return Status::Ok();
}

// w_gate and w_up: separate tensors, or the halves of ffn_up.weight.
Status LoadGateUp(const GgufFile& file, const LlamaHparams& h,
                  const ArchSpec& arch, const std::string& p, LayerWeights* w) {
  if (arch.fused_gate_up) {
    KV_ASSIGN_OR_RETURN(
        kernels::MatrixView gate_up,
        LoadMatrix(file, p + "ffn_up.weight", h.n_embd, 2 * uint64_t{h.n_ff}));
    w->w_gate = RowRange(gate_up, 0, h.n_ff);
    w->w_up = RowRange(gate_up, h.n_ff, h.n_ff);
    return Status::Ok();
  }
  KV_ASSIGN_OR_RETURN(
      w->w_gate, LoadMatrix(file, p + "ffn_gate.weight", h.n_embd, h.n_ff));
  KV_ASSIGN_OR_RETURN(w->w_up,
                      LoadMatrix(file, p + "ffn_up.weight", h.n_embd, h.n_ff));
  return Status::Ok();
}

// The `n_expert` matrices of 3-D tensor `name` [cols, rows, n_expert],
// each multiplied as a matrix of its own.
StatusOr<std::vector<kernels::MatrixView>> LoadExpertMatrices(
    const GgufFile& file, const std::string& name, uint64_t cols, uint64_t rows,
    uint64_t n_expert) {
  KV_ASSIGN_OR_RETURN(const GgufTensorInfo* info,
                      FindShaped(file, name, {cols, rows, n_expert}));
  KV_RETURN_IF_ERROR(CheckMatrixTypeSupported(info->type, name));
  kernels::MatrixView view;
  view.type = info->type;
  view.rows = static_cast<int64_t>(rows);
  view.cols = static_cast<int64_t>(cols);
  view.row_bytes = info->size_bytes / (rows * n_expert);
  std::vector<kernels::MatrixView> experts;
  for (uint64_t e = 0; e < n_expert; ++e) {
    view.data = file.TensorData(*info).data() + e * rows * view.row_bytes;
    experts.push_back(view);
  }
  return experts;
}

// The router and the experts of a mixture-of-experts FFN (llama.cpp's
// ffn_gate_inp and ffn_{gate,up,down}_exps).
Status LoadExperts(const GgufFile& file, const LlamaHparams& h,
                   const std::string& p, LayerWeights* w) {
  KV_ASSIGN_OR_RETURN(w->gate_inp, LoadMatrix(file, p + "ffn_gate_inp.weight",
                                              h.n_embd, h.n_expert));
  KV_ASSIGN_OR_RETURN(std::vector<kernels::MatrixView> gate,
                      LoadExpertMatrices(file, p + "ffn_gate_exps.weight",
                                         h.n_embd, h.n_ff_exp, h.n_expert));
  KV_ASSIGN_OR_RETURN(std::vector<kernels::MatrixView> up,
                      LoadExpertMatrices(file, p + "ffn_up_exps.weight",
                                         h.n_embd, h.n_ff_exp, h.n_expert));
  KV_ASSIGN_OR_RETURN(std::vector<kernels::MatrixView> down,
                      LoadExpertMatrices(file, p + "ffn_down_exps.weight",
                                         h.n_ff_exp, h.n_embd, h.n_expert));
  for (uint32_t e = 0; e < h.n_expert; ++e) {
    w->experts.push_back({gate[e], up[e], down[e]});
  }
  return Status::Ok();
}

// The FFN's matrices: a mixture of experts, or one SwiGLU FFN.
Status LoadFfn(const GgufFile& file, const LlamaHparams& h,
               const ArchSpec& arch, const std::string& p, LayerWeights* w) {
  if (h.n_expert > 0) return LoadExperts(file, h, p, w);
  KV_RETURN_IF_ERROR(LoadGateUp(file, h, arch, p, w));
  KV_ASSIGN_OR_RETURN(
      w->w_down, LoadMatrix(file, p + "ffn_down.weight", h.n_ff, h.n_embd));
  return Status::Ok();
}

StatusOr<LayerWeights> LoadLayer(const GgufFile& file, const LlamaHparams& h,
                                 const ArchSpec& arch, uint32_t layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  const uint64_t q_dim = uint64_t{h.n_head} * h.n_embd_head_k;
  const uint64_t k_dim = h.n_embd_k_gqa();
  const uint64_t v_dim = h.n_embd_v_gqa();
  const uint64_t o_in = uint64_t{h.n_head} * h.n_embd_head_v;
  LayerWeights w;
  KV_ASSIGN_OR_RETURN(w.attn_norm,
                      LoadVector(file, p + "attn_norm.weight", h.n_embd));
  KV_RETURN_IF_ERROR(LoadQkv(file, h, arch, p, &w));
  KV_ASSIGN_OR_RETURN(
      w.wo, LoadMatrix(file, p + "attn_output.weight", o_in, h.n_embd));
  if (arch.qkv_bias) {
    KV_ASSIGN_OR_RETURN(w.bq, LoadVector(file, p + "attn_q.bias", q_dim));
    KV_ASSIGN_OR_RETURN(w.bk, LoadVector(file, p + "attn_k.bias", k_dim));
    KV_ASSIGN_OR_RETURN(w.bv, LoadVector(file, p + "attn_v.bias", v_dim));
  }
  if (arch.qk_norm) {
    KV_ASSIGN_OR_RETURN(
        w.q_norm, LoadVector(file, p + "attn_q_norm.weight", h.n_embd_head_k));
    KV_ASSIGN_OR_RETURN(
        w.k_norm, LoadVector(file, p + "attn_k_norm.weight", h.n_embd_head_k));
  }
  KV_ASSIGN_OR_RETURN(w.ffn_norm,
                      LoadVector(file, p + "ffn_norm.weight", h.n_embd));
  if (arch.post_norms) {
    KV_ASSIGN_OR_RETURN(
        w.post_attn_norm,
        LoadVector(file, p + "post_attention_norm.weight", h.n_embd));
    KV_ASSIGN_OR_RETURN(w.post_ffn_norm,
                        LoadVector(file, p + "post_ffw_norm.weight", h.n_embd));
  }
  KV_RETURN_IF_ERROR(LoadFfn(file, h, arch, p, &w));
  return w;
}

// rope_freqs.weight: optional where the architecture allows it; every
// factor divides an angle, so it must be positive and finite.
Status LoadRopeFreqs(const GgufFile& file, const LlamaHparams& h,
                     const ArchSpec& arch, std::vector<float>* out) {
  for (const char* longrope :
       {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    if (file.FindTensor(longrope) != nullptr) {
      return UnimplementedError("tensor " + std::string(longrope) +
                                " (LongRoPE frequency factors) is not "
                                "supported");
    }
  }
  const std::string name = "rope_freqs.weight";
  if (file.FindTensor(name) == nullptr) return Status::Ok();
  if (!arch.rope_freq_factors) {
    return UnimplementedError("tensor " + name +
                              " (RoPE frequency factors) is not supported "
                              "for architecture '" +
                              std::string(arch.name) + "'");
  }
  KV_ASSIGN_OR_RETURN(*out, LoadVector(file, name, h.n_rot / 2));
  for (size_t i = 0; i < out->size(); ++i) {
    if (!std::isfinite((*out)[i]) || (*out)[i] <= 0.0f) {
      return InvalidArgumentError(
          "tensor " + name + " element " + std::to_string(i) + " = " +
          std::to_string((*out)[i]) + ", expected positive and finite");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckMatrixTypeSupported(GgmlType type, std::string_view tensor_name) {
  if (GetGgmlTypeInfo(type).supported_for_compute) return Status::Ok();
  std::string supported;
  for (const GgmlTypeInfo& info : AllGgmlTypes()) {
    if (!info.supported_for_compute) continue;
    supported += (supported.empty() ? "" : ", ") + std::string(info.name);
  }
  return UnimplementedError(
      "tensor " + std::string(tensor_name) + " has type " +
      std::string(GgmlTypeName(type)) +
      ", which is not supported (supported: " + supported + ")");
}

StatusOr<LlamaWeights> LoadLlamaWeights(const GgufFile& file,
                                        const LlamaHparams& hparams,
                                        const ArchSpec& arch) {
  LlamaWeights w;
  KV_ASSIGN_OR_RETURN(
      w.token_embd,
      LoadMatrix(file, "token_embd.weight", hparams.n_embd, hparams.n_vocab));
  KV_ASSIGN_OR_RETURN(w.output_norm,
                      LoadVector(file, "output_norm.weight", hparams.n_embd));
  if (file.FindTensor("output.weight") == nullptr && arch.tied_output_allowed) {
    w.output = w.token_embd;
    w.output_tied = true;
  } else {
    KV_ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "output.weight",
                                             hparams.n_embd, hparams.n_vocab));
  }
  KV_RETURN_IF_ERROR(LoadRopeFreqs(file, hparams, arch, &w.rope_freqs));
  w.layers.reserve(hparams.n_layer);
  for (uint32_t layer = 0; layer < hparams.n_layer; ++layer) {
    KV_ASSIGN_OR_RETURN(LayerWeights lw, LoadLayer(file, hparams, arch, layer));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace kvault
