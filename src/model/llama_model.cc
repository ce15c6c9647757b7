#include "model/llama_model.h"

#include <cmath>
#include <utility>

#include "model/model_fingerprint.h"

namespace kvault {
namespace {

// RoPE variants other than linear scaling change the rotation itself; a
// factor of 1 (or none) makes them plain RoPE.
Status CheckRopeScaling(const LlamaHparams& h) {
  const bool scaled =
      h.rope_scaling_factor != 0.0f && h.rope_scaling_factor != 1.0f;
  if (h.rope_scaling_type == RopeScalingType::kNone ||
      h.rope_scaling_type == RopeScalingType::kLinear || !scaled) {
    return Status::Ok();
  }
  return UnimplementedError(
      "rope scaling type " +
      std::string(RopeScalingTypeName(h.rope_scaling_type)) +
      " is not supported (none and linear are)");
}

// Reads a float key into *out when present.
Status ReadOptionalFloat(const GgufFile& file, const std::string& key,
                         float* out) {
  if (!file.Has(key)) return Status::Ok();
  KV_ASSIGN_OR_RETURN(double v, file.GetFloat(key));
  *out = static_cast<float>(v);
  return Status::Ok();
}

// Whether the FFN's form (dense, or a mixture of experts by expert_count)
// is one the architecture has (ArchSpec::moe), and the expert options
// llama.cpp would apply that kvault does not: a shared expert (Granite
// MoE) and a scale of the expert weights.
Status CheckExperts(const GgufFile& file, const ArchSpec& arch,
                    const LlamaHparams& h) {
  const std::string key = h.architecture + ".expert_count";
  if (h.n_expert > 0 && arch.moe == MoeSupport::kNone) {
    return UnimplementedError("architecture '" + h.architecture +
                              "' with a mixture-of-experts FFN (" + key +
                              " = " + std::to_string(h.n_expert) +
                              ") is not supported (it runs dense FFNs only)");
  }
  if (h.n_expert == 0 && arch.moe == MoeSupport::kRequired) {
    return InvalidArgumentError("architecture '" + h.architecture + "' needs " +
                                key + " > 0, got 0");
  }
  if (h.n_expert == 0) return Status::Ok();
  const std::string shared =
      h.architecture + ".expert_shared_feed_forward_length";
  if (file.Has(shared)) {
    KV_ASSIGN_OR_RETURN(uint64_t width, file.GetUint(shared));
    if (width > 0) {
      return UnimplementedError("a shared expert (" + shared + " = " +
                                std::to_string(width) + ") is not supported");
    }
  }
  float scale = 0.0f;
  KV_RETURN_IF_ERROR(ReadOptionalFloat(
      file, h.architecture + ".expert_weights_scale", &scale));
  if (scale != 0.0f && scale != 1.0f) {
    return UnimplementedError(
        h.architecture + ".expert_weights_scale = " + std::to_string(scale) +
        " is not supported (0 or 1 are)");
  }
  return Status::Ok();
}

}  // namespace

// The keys only some architectures read, with llama.cpp's defaults for
// gemma2 (window 4096, soft-caps 50 and 30).
Status ReadArchHparams(const GgufFile& file, const ArchSpec& arch,
                       LlamaHparams* h) {
  const std::string p = h->architecture + ".";
  if (arch.swa_pattern > 0) {
    // gemma2's default window. A gemma3 file without one is a variant
    // (global layers only, a final soft-cap) kvault has not checked.
    h->n_swa = 4096;
    if (arch.swa_rope_freq_base > 0.0f &&
        !file.Has(p + "attention.sliding_window")) {
      return UnimplementedError("architecture '" + h->architecture +
                                "' without " + p +
                                "attention.sliding_window is not supported");
    }
    if (file.Has(p + "attention.sliding_window")) {
      KV_ASSIGN_OR_RETURN(uint64_t n,
                          file.GetUint(p + "attention.sliding_window"));
      if (n == 0 || n > kMaxContext) {
        return InvalidArgumentError(
            "model hyperparameter " + p + "attention.sliding_window = " +
            std::to_string(n) + " is not in 1.." + std::to_string(kMaxContext));
      }
      h->n_swa = static_cast<uint32_t>(n);
    }
    h->swa_pattern = arch.swa_pattern;
    const std::string key = p + "attention.sliding_window_pattern";
    if (const GgufValue* v = file.Find(key); v != nullptr && v->is_array()) {
      return UnimplementedError("model hyperparameter " + key +
                                " as a per-layer array is not supported");
    }
    if (file.Has(key)) {
      KV_ASSIGN_OR_RETURN(uint64_t n, file.GetUint(key));
      if (n == 0 || n > kMaxLayers) {
        return InvalidArgumentError("model hyperparameter " + key + " = " +
                                    std::to_string(n) + " is not in 1.." +
                                    std::to_string(kMaxLayers));
      }
      h->swa_pattern = static_cast<uint32_t>(n);
    }
  }
  if (arch.softcap) {
    h->attn_softcap = 50.0f;
    h->final_softcap = 30.0f;
    KV_RETURN_IF_ERROR(ReadOptionalFloat(file, p + "attn_logit_softcapping",
                                         &h->attn_softcap));
    KV_RETURN_IF_ERROR(ReadOptionalFloat(file, p + "final_logit_softcapping",
                                         &h->final_softcap));
    for (float cap : {h->attn_softcap, h->final_softcap}) {
      if (!std::isfinite(cap) || cap <= 0.0f) {
        return InvalidArgumentError("model soft-capping value " +
                                    std::to_string(cap) +
                                    " must be positive and finite");
      }
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path,
                                                       LoadMode mode,
                                                       kernels::Isa isa) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file,
                      GgufFile::Open(path, mode));
  StatusOr<std::unique_ptr<LlamaModel>> model = FromGguf(std::move(file), isa);
  if (!model.ok()) return model.status().WithContext(path);
  return model;
}

namespace {

// The bytes of `tensor` one decode step reads: none of a token embedding
// that is not also the output matrix (one row), n_expert_used / n_expert
// of an expert tensor (the experts one token runs), all of the rest.
uint64_t DecodeBytes(const GgufTensorInfo& tensor, const LlamaHparams& h,
                     bool tied) {
  if (!tied && tensor.name == "token_embd.weight") return 0;
  if (h.n_expert > 0 && tensor.name.ends_with("_exps.weight")) {
    return tensor.size_bytes / h.n_expert * h.n_expert_used;
  }
  return tensor.size_bytes;
}

// Rewrites, in place, the matrices whose kernels (those of `isa`) prefer
// another layout (kernels::PrefersGroups16) when the file's bytes are
// private (a file read into memory; a mapped one stays as it is). Only
// matrices that are nothing but MatMul weights: not the token embedding,
// whose rows are dequantized one at a time, nor an output matrix tied to
// it.
Status LayOutForKernels(GgufFile& file, kernels::Isa isa, LlamaWeights* w) {
  std::vector<kernels::MatrixView*> views;
  for (LayerWeights& l : w->layers) {
    std::vector<kernels::MatrixView*> matrices = {
        &l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_inp};
    for (ExpertWeights& e : l.experts) {
      matrices.insert(matrices.end(), {&e.gate, &e.up, &e.down});
    }
    for (kernels::MatrixView* m : matrices) {
      if (m->data != nullptr && kernels::PrefersGroups16(*m, isa)) {
        views.push_back(m);
      }
    }
  }
  if (!w->output_tied && kernels::PrefersGroups16(w->output, isa)) {
    views.push_back(&w->output);
  }
  if (views.empty()) return Status::Ok();
  const std::byte* base = file.bytes().data();
  return file
      .RewriteInPlace([&](std::span<std::byte> bytes) {
        for (kernels::MatrixView* m : views) {
          const size_t offset = static_cast<size_t>(m->data - base);
          kernels::RewriteAsGroups16(
              bytes.subspan(offset,
                            static_cast<size_t>(m->rows) * m->row_bytes),
              m);
        }
      })
      .status();
}

}  // namespace

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::FromGguf(
    std::unique_ptr<GgufFile> file, kernels::Isa isa) {
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  KV_ASSIGN_OR_RETURN(model->hparams_, ReadLlamaHparams(*file));
  KV_ASSIGN_OR_RETURN(model->arch_, FindArchSpec(model->hparams_.architecture));
  KV_RETURN_IF_ERROR(CheckRopeScaling(model->hparams_));
  KV_RETURN_IF_ERROR(CheckExperts(*file, model->arch_, model->hparams_));
  KV_RETURN_IF_ERROR(ReadArchHparams(*file, model->arch_, &model->hparams_));
  KV_ASSIGN_OR_RETURN(model->weights_,
                      LoadLlamaWeights(*file, model->hparams_, model->arch_));
  KV_ASSIGN_OR_RETURN(model->tokenizer_, Tokenizer::FromGguf(*file));
  if (model->tokenizer_->num_tokens() != model->hparams_.n_vocab) {
    return InvalidArgumentError(
        "tokenizer has " + std::to_string(model->tokenizer_->num_tokens()) +
        " tokens but the model's vocabulary size is " +
        std::to_string(model->hparams_.n_vocab));
  }
  for (const GgufTensorInfo& tensor : file->tensors()) {
    model->weight_bytes_ += tensor.size_bytes;
    model->num_parameters_ += tensor.num_elements;
    model->decode_bytes_ +=
        DecodeBytes(tensor, model->hparams_, model->weights_.output_tied);
  }
  model->fingerprint_ = ComputeModelFingerprint(*file);
  KV_RETURN_IF_ERROR(LayOutForKernels(*file, isa, &model->weights_));
  model->file_ = std::move(file);
  return model;
}

KvLayout LlamaModel::KvLayoutFor(KvDtype dtype) const {
  KvLayout layout;
  layout.num_layers = hparams_.n_layer;
  layout.num_kv_heads = hparams_.n_head_kv;
  layout.head_dim_k = hparams_.n_embd_head_k;
  layout.head_dim_v = hparams_.n_embd_head_v;
  layout.dtype = dtype;
  return layout;
}

}  // namespace kvault
