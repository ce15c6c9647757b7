#include "model/llama_hparams.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "model/arch_spec.h"

namespace kvault {
namespace {

Status NonZero(std::string_view name, uint64_t v) {
  if (v != 0) return Status::Ok();
  return InvalidArgumentError("model hyperparameter " + std::string(name) +
                              " must be > 0");
}

std::string Key(const LlamaHparams& h, std::string_view suffix) {
  return h.architecture + "." + std::string(suffix);
}

// Reads an unsigned integer key into a uint32 field, range-checked.
Status ReadU32(const GgufFile& file, const std::string& key, uint32_t max,
               uint32_t* out) {
  KV_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key));
  if (v > max) {
    return InvalidArgumentError("model hyperparameter " + key + " = " +
                                std::to_string(v) + " is over the limit " +
                                std::to_string(max));
  }
  *out = static_cast<uint32_t>(v);
  return Status::Ok();
}

// As ReadU32, but leaves *out (the default) alone when `key` is absent.
Status ReadOptionalU32(const GgufFile& file, const std::string& key,
                       uint32_t max, uint32_t* out) {
  if (!file.Has(key)) return Status::Ok();
  return ReadU32(file, key, max, out);
}

// llama.cpp reads head counts and the FFN width with get_key_or_arr: either
// one integer or one per layer. kvault's model is uniform, so an array must
// hold n_layer equal values.
Status ReadU32OrArray(const GgufFile& file, const std::string& key,
                      uint32_t n_layer, uint32_t max, uint32_t* out) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr || !v->is_array()) return ReadU32(file, key, max, out);
  KV_ASSIGN_OR_RETURN(std::vector<int64_t> values, file.GetIntArray(key));
  if (values.size() != n_layer) {
    return InvalidArgumentError("model hyperparameter " + key + " has " +
                                std::to_string(values.size()) +
                                " per-layer values, expected " +
                                std::to_string(n_layer));
  }
  for (int64_t x : values) {
    if (x != values[0]) {
      return UnimplementedError("model hyperparameter " + key +
                                " differs between layers");
    }
  }
  if (values.empty() || values[0] < 0 || values[0] > max) {
    return InvalidArgumentError("model hyperparameter " + key +
                                " is out of range");
  }
  *out = static_cast<uint32_t>(values[0]);
  return Status::Ok();
}

Status ReadOptionalFloat(const GgufFile& file, const std::string& key,
                         float* out) {
  if (!file.Has(key)) return Status::Ok();
  KV_ASSIGN_OR_RETURN(double v, file.GetFloat(key));
  *out = static_cast<float>(v);
  return Status::Ok();
}

StatusOr<RopeScalingType> ParseRopeScaling(const std::string& key,
                                           const std::string& name) {
  if (name == "none") return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope") return RopeScalingType::kLongrope;
  return InvalidArgumentError("model hyperparameter " + key + " = '" + name +
                              "' is not none, linear, yarn "
                              "or longrope");
}

// Vocabulary size: the tokenizer's token list when present (what llama.cpp
// uses), else <arch>.vocab_size, else token_embd.weight's second dimension.
Status ReadVocabSize(const GgufFile& file, LlamaHparams* h) {
  uint64_t n = 0;
  if (const GgufValue* tokens = file.Find("tokenizer.ggml.tokens")) {
    n = tokens->array_size();
  } else if (file.Has(Key(*h, "vocab_size"))) {
    KV_ASSIGN_OR_RETURN(n, file.GetUint(Key(*h, "vocab_size")));
  } else if (const GgufTensorInfo* t = file.FindTensor("token_embd.weight")) {
    n = t->ne(1);
  } else {
    return NotFoundError(
        "model has no vocabulary size: no tokenizer.ggml.tokens, " +
        Key(*h, "vocab_size") + " or token_embd.weight");
  }
  if (n == 0 || n > kMaxVocab) {
    return InvalidArgumentError("vocabulary size " + std::to_string(n) +
                                " is not in 1.." + std::to_string(kMaxVocab));
  }
  h->n_vocab = static_cast<uint32_t>(n);
  return Status::Ok();
}

// The sizes llama.cpp requires, and head_count_kv.
Status ReadSizes(const GgufFile& file, LlamaHparams* h) {
  KV_ASSIGN_OR_RETURN(h->architecture, file.GetString("general.architecture"));
  // Required by llama.cpp (get_key without a default).
  KV_RETURN_IF_ERROR(
      ReadU32(file, Key(*h, "embedding_length"), kMaxEmbd, &h->n_embd));
  KV_RETURN_IF_ERROR(
      ReadU32(file, Key(*h, "block_count"), kMaxLayers, &h->n_layer));
  KV_RETURN_IF_ERROR(
      ReadU32(file, Key(*h, "context_length"), kMaxContext, &h->n_ctx_train));
  KV_RETURN_IF_ERROR(ReadU32OrArray(file, Key(*h, "attention.head_count"),
                                    h->n_layer, kMaxHeads, &h->n_head));
  KV_RETURN_IF_ERROR(ReadU32OrArray(file, Key(*h, "feed_forward_length"),
                                    h->n_layer, kMaxFeedForward, &h->n_ff));
  // llama.cpp: "n_head_kv is optional, default to n_head".
  h->n_head_kv = h->n_head;
  if (file.Has(Key(*h, "attention.head_count_kv"))) {
    KV_RETURN_IF_ERROR(ReadU32OrArray(file, Key(*h, "attention.head_count_kv"),
                                      h->n_layer, kMaxHeads, &h->n_head_kv));
  }
  // llama.cpp: both optional, 0 (a dense FFN) by default.
  KV_RETURN_IF_ERROR(ReadOptionalU32(file, Key(*h, "expert_count"), kMaxExperts,
                                     &h->n_expert));
  KV_RETURN_IF_ERROR(ReadOptionalU32(file, Key(*h, "expert_used_count"),
                                     kMaxExperts, &h->n_expert_used));
  return Status::Ok();
}

// One expert's FFN width: feed_forward_length, or for the architectures
// with ArchSpec::expert_ff_length their key, which defaults (llama.cpp's
// qwen3moe) to feed_forward_length / expert_used_count.
Status ReadExpertWidth(const GgufFile& file, LlamaHparams* h) {
  if (h->n_expert == 0) return Status::Ok();
  h->n_ff_exp = h->n_ff;
  const StatusOr<ArchSpec> arch = FindArchSpec(h->architecture);
  if (!arch.ok() || !arch->expert_ff_length) return Status::Ok();
  h->n_ff_exp = h->n_expert_used == 0 ? 0 : h->n_ff / h->n_expert_used;
  return ReadOptionalU32(file, Key(*h, "expert_feed_forward_length"),
                         kMaxFeedForward, &h->n_ff_exp);
}

Status ReadHeadDims(const GgufFile& file, LlamaHparams* h) {
  // llama.cpp: head dims default to n_embd / n_head (key_length and
  // value_length optional), and n_rot defaults to n_embd_head_k.
  if (h->n_head == 0) return NonZero(Key(*h, "attention.head_count"), 0);
  if (h->n_embd % h->n_head != 0 &&
      !file.Has(Key(*h, "attention.key_length"))) {
    return InvalidArgumentError(
        "model hyperparameter " + Key(*h, "embedding_length") + " = " +
        std::to_string(h->n_embd) + " is not a multiple of " +
        Key(*h, "attention.head_count") + " = " + std::to_string(h->n_head));
  }
  h->n_embd_head_k = h->n_head == 0 ? 0 : h->n_embd / h->n_head;
  KV_RETURN_IF_ERROR(ReadOptionalU32(file, Key(*h, "attention.key_length"),
                                     kMaxEmbd, &h->n_embd_head_k));
  h->n_embd_head_v = h->n_head == 0 ? 0 : h->n_embd / h->n_head;
  KV_RETURN_IF_ERROR(ReadOptionalU32(file, Key(*h, "attention.value_length"),
                                     kMaxEmbd, &h->n_embd_head_v));
  h->n_rot = h->n_embd_head_k;
  KV_RETURN_IF_ERROR(ReadOptionalU32(file, Key(*h, "rope.dimension_count"),
                                     kMaxEmbd, &h->n_rot));
  return Status::Ok();
}

Status ReadRopeAndNorm(const GgufFile& file, LlamaHparams* h) {
  // llama.cpp: rope_freq_base_train = 10000.0f unless rope.freq_base is set.
  h->rope_freq_base = 10000.0f;
  KV_RETURN_IF_ERROR(
      ReadOptionalFloat(file, Key(*h, "rope.freq_base"), &h->rope_freq_base));
  // llama.cpp reads the RMS epsilon for the llama architecture with a
  // required get_key: a file without it fails to load. kvault does the same
  // rather than invent a value.
  KV_ASSIGN_OR_RETURN(
      double eps, file.GetFloat(Key(*h, "attention.layer_norm_rms_epsilon")));
  h->rms_norm_eps = static_cast<float>(eps);
  // llama.cpp: rope.scaling.type defaults to "linear" (a no-op at factor
  // 1); rope.scaling.factor falls back to the old rope.scale_linear key,
  // and 0 / absent means a frequency scale of 1; the original context
  // length defaults to context_length.
  if (file.Has(Key(*h, "rope.scaling.type"))) {
    KV_ASSIGN_OR_RETURN(std::string type,
                        file.GetString(Key(*h, "rope.scaling.type")));
    KV_ASSIGN_OR_RETURN(h->rope_scaling_type,
                        ParseRopeScaling(Key(*h, "rope.scaling.type"), type));
  }
  if (file.Has(Key(*h, "rope.scaling.factor"))) {
    KV_RETURN_IF_ERROR(ReadOptionalFloat(file, Key(*h, "rope.scaling.factor"),
                                         &h->rope_scaling_factor));
  } else {
    KV_RETURN_IF_ERROR(ReadOptionalFloat(file, Key(*h, "rope.scale_linear"),
                                         &h->rope_scaling_factor));
  }
  h->rope_scaling_orig_ctx = h->n_ctx_train;
  KV_RETURN_IF_ERROR(
      ReadOptionalU32(file, Key(*h, "rope.scaling.original_context_length"),
                      kMaxContext, &h->rope_scaling_orig_ctx));
  return Status::Ok();
}

Status ReadHparamsUnchecked(const GgufFile& file, LlamaHparams* h) {
  KV_RETURN_IF_ERROR(ReadSizes(file, h));
  KV_RETURN_IF_ERROR(ReadHeadDims(file, h));
  KV_RETURN_IF_ERROR(ReadRopeAndNorm(file, h));
  KV_RETURN_IF_ERROR(ReadExpertWidth(file, h));
  return ReadVocabSize(file, h);
}

}  // namespace

std::string_view RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLongrope:
      return "longrope";
  }
  return "invalid";
}

float LlamaHparams::rope_freq_scale() const {
  return rope_scaling_factor == 0.0f ? 1.0f : 1.0f / rope_scaling_factor;
}

std::string LlamaHparams::ToString() const {
  std::ostringstream os;
  os << "arch=" << architecture << " n_embd=" << n_embd
     << " n_layer=" << n_layer << " n_head=" << n_head
     << " n_head_kv=" << n_head_kv << " n_ff=" << n_ff
     << " n_ctx_train=" << n_ctx_train << " n_embd_head_k=" << n_embd_head_k
     << " n_embd_head_v=" << n_embd_head_v << " n_rot=" << n_rot
     << " n_vocab=" << n_vocab << " rope_freq_base=" << rope_freq_base
     << " rms_norm_eps=" << rms_norm_eps
     << " rope_scaling=" << RopeScalingTypeName(rope_scaling_type);
  if (rope_scaling_factor != 0.0f) os << " x" << rope_scaling_factor;
  os << " rope_orig_ctx=" << rope_scaling_orig_ctx;
  if (n_expert > 0) {
    os << " n_expert=" << n_expert << " n_expert_used=" << n_expert_used
       << " n_ff_exp=" << n_ff_exp;
  }
  return os.str();
}

namespace {

Status PositiveFinite(const char* name, float v) {
  if (std::isfinite(v) && v > 0.0f) return Status::Ok();
  return InvalidArgumentError(std::string("model hyperparameter ") + name +
                              " = " + std::to_string(v) +
                              " must be positive and finite");
}

// llama.cpp's asserts on the expert counts, as errors.
Status ValidateExperts(const LlamaHparams& h) {
  const std::string counts = "expert_count " + std::to_string(h.n_expert) +
                             ", expert_used_count " +
                             std::to_string(h.n_expert_used);
  if (h.n_expert > kMaxExperts) {
    return InvalidArgumentError("model hyperparameter " + counts +
                                ": expert_count is over the limit " +
                                std::to_string(kMaxExperts));
  }
  if (h.n_expert_used > h.n_expert) {
    return InvalidArgumentError("model hyperparameter " + counts +
                                ": more experts used than there are");
  }
  if (h.n_expert > 0 && h.n_expert_used == 0) {
    return InvalidArgumentError("model hyperparameter " + counts +
                                ": a mixture of experts must use one");
  }
  if (h.n_expert > 0 && (h.n_ff_exp == 0 || h.n_ff_exp > kMaxFeedForward)) {
    return InvalidArgumentError("model hyperparameter expert FFN width " +
                                std::to_string(h.n_ff_exp) + " is not in 1.." +
                                std::to_string(kMaxFeedForward));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateLlamaHparams(const LlamaHparams& h) {
  KV_RETURN_IF_ERROR(NonZero("n_embd", h.n_embd));
  KV_RETURN_IF_ERROR(NonZero("n_layer", h.n_layer));
  KV_RETURN_IF_ERROR(NonZero("n_head", h.n_head));
  KV_RETURN_IF_ERROR(NonZero("n_head_kv", h.n_head_kv));
  KV_RETURN_IF_ERROR(NonZero("n_ff", h.n_ff));
  KV_RETURN_IF_ERROR(NonZero("n_ctx_train", h.n_ctx_train));
  KV_RETURN_IF_ERROR(NonZero("n_embd_head_k", h.n_embd_head_k));
  KV_RETURN_IF_ERROR(NonZero("n_embd_head_v", h.n_embd_head_v));
  KV_RETURN_IF_ERROR(NonZero("n_vocab", h.n_vocab));
  if (h.n_embd > kMaxEmbd || h.n_layer > kMaxLayers || h.n_head > kMaxHeads ||
      h.n_head_kv > kMaxHeads || h.n_ff > kMaxFeedForward ||
      h.n_ctx_train > kMaxContext || h.n_vocab > kMaxVocab ||
      h.n_embd_head_k > kMaxEmbd || h.n_embd_head_v > kMaxEmbd) {
    return InvalidArgumentError("model hyperparameters over kvault's limits: " +
                                h.ToString());
  }
  if (h.n_head % h.n_head_kv != 0) {
    return InvalidArgumentError(
        "model hyperparameter n_head " + std::to_string(h.n_head) +
        " is not a multiple of n_head_kv " + std::to_string(h.n_head_kv));
  }
  if (uint64_t{h.n_embd_head_k} * h.n_head > kMaxEmbd * 4ull ||
      uint64_t{h.n_embd_head_v} * h.n_head > kMaxEmbd * 4ull) {
    return InvalidArgumentError(
        "attention width n_head * head dim is over "
        "kvault's limits: " +
        h.ToString());
  }
  if (h.n_rot == 0 || h.n_rot % 2 != 0 || h.n_rot > h.n_embd_head_k) {
    return InvalidArgumentError(
        "model hyperparameter n_rot " + std::to_string(h.n_rot) +
        " must be even and in 2.." + std::to_string(h.n_embd_head_k));
  }
  KV_RETURN_IF_ERROR(ValidateExperts(h));
  KV_RETURN_IF_ERROR(PositiveFinite("rms_norm_eps", h.rms_norm_eps));
  KV_RETURN_IF_ERROR(PositiveFinite("rope_freq_base", h.rope_freq_base));
  if (!std::isfinite(h.rope_scaling_factor) || h.rope_scaling_factor < 0.0f) {
    return InvalidArgumentError("model hyperparameter rope scaling factor " +
                                std::to_string(h.rope_scaling_factor) +
                                " must be >= 0 and finite");
  }
  return Status::Ok();
}

StatusOr<LlamaHparams> ReadLlamaHparams(const GgufFile& file) {
  LlamaHparams h;
  Status s = ReadHparamsUnchecked(file, &h);
  if (s.ok() && file.FindTensor("token_embd.weight") == nullptr) {
    // Vocab-only files have no weights; there is nothing to cross-check.
  } else if (s.ok()) {
    const GgufTensorInfo& t = *file.FindTensor("token_embd.weight");
    if (t.shape.size() != 2 || t.shape[0] != h.n_embd ||
        t.shape[1] != h.n_vocab) {
      s = InvalidArgumentError(
          "token_embd.weight has shape [" + std::to_string(t.ne(0)) + ", " +
          std::to_string(t.ne(1)) + "], expected [n_embd " +
          std::to_string(h.n_embd) + ", n_vocab " + std::to_string(h.n_vocab) +
          "]");
    }
  }
  if (s.ok()) s = ValidateLlamaHparams(h);
  if (!s.ok()) return s.WithContext("reading model hyperparameters");
  return h;
}

}  // namespace kvault
