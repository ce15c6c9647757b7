#include "model/quantize_plan.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <utility>

namespace kvault {
namespace {

struct FileTypeName {
  QuantFileType ftype;
  std::string_view name;
  GgmlType base;
};

constexpr FileTypeName kFileTypes[] = {
    {QuantFileType::kF32, "F32", GgmlType::kF32},
    {QuantFileType::kF16, "F16", GgmlType::kF16},
    {QuantFileType::kBF16, "BF16", GgmlType::kBF16},
    {QuantFileType::kQ4_0, "Q4_0", GgmlType::kQ4_0},
    {QuantFileType::kQ4_1, "Q4_1", GgmlType::kQ4_1},
    {QuantFileType::kQ5_0, "Q5_0", GgmlType::kQ5_0},
    {QuantFileType::kQ5_1, "Q5_1", GgmlType::kQ5_1},
    {QuantFileType::kQ8_0, "Q8_0", GgmlType::kQ8_0},
    {QuantFileType::kQ2_K, "Q2_K", GgmlType::kQ2_K},
    {QuantFileType::kQ3_K_S, "Q3_K_S", GgmlType::kQ3_K},
    {QuantFileType::kQ3_K_M, "Q3_K_M", GgmlType::kQ3_K},
    {QuantFileType::kQ3_K_L, "Q3_K_L", GgmlType::kQ3_K},
    {QuantFileType::kQ4_K_S, "Q4_K_S", GgmlType::kQ4_K},
    {QuantFileType::kQ4_K_M, "Q4_K_M", GgmlType::kQ4_K},
    {QuantFileType::kQ5_K_S, "Q5_K_S", GgmlType::kQ5_K},
    {QuantFileType::kQ5_K_M, "Q5_K_M", GgmlType::kQ5_K},
    {QuantFileType::kQ6_K, "Q6_K", GgmlType::kQ6_K},
    {QuantFileType::kIQ4_NL, "IQ4_NL", GgmlType::kIQ4_NL},
    {QuantFileType::kIQ4_XS, "IQ4_XS", GgmlType::kIQ4_XS},
};

const FileTypeName& Row(QuantFileType ftype) {
  for (const FileTypeName& r : kFileTypes) {
    if (r.ftype == ftype) return r;
  }
  return kFileTypes[0];
}

enum class Category {
  kTokenEmbd,
  kAttnV,  // attn_v, attn_qkv, attn_kv_b
  kAttnK,
  kAttnQ,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther,
};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

Category Categorize(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    return Category::kTokenEmbd;
  }
  if (Contains(name, "attn_qkv.weight") || Contains(name, "attn_kv_b.weight") ||
      Contains(name, "attn_v.weight")) {
    return Category::kAttnV;
  }
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up")) return Category::kFfnUp;
  if (Contains(name, "ffn_gate")) return Category::kFfnGate;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// ggml_n_dims: the number of dimensions up to the last one above 1.
size_t NumDims(const std::vector<uint64_t>& shape) {
  size_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1) n = i + 1;
  }
  return n;
}

// llama.cpp's tensor_allows_quantization for the names a Llama-family
// (or similar) GGUF holds.
bool AllowsQuantization(const PlanTensor& t) {
  if (NumDims(t.shape) < 2) return false;
  const std::string_view name = t.name;
  if (!name.ends_with("weight")) return false;
  static constexpr std::string_view kKeep[] = {"_norm.weight",
                                               "ffn_gate_inp.weight",
                                               "ffn_gate_tid2eid.weight",
                                               "altup",
                                               "laurel",
                                               "per_layer_model_proj",
                                               "ssm_conv1d",
                                               "shortconv.conv.weight",
                                               "attn_rel_b.weight",
                                               "time_mix_",
                                               ".position_embd",
                                               ".rel_pos",
                                               ".patch_embd",
                                               ".patch_merger",
                                               "indexer.k_proj.weight",
                                               "indexer.q_proj.weight"};
  for (std::string_view k : kKeep) {
    if (Contains(name, k)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

bool IsQuantized(GgmlType t) {
  return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16;
}

uint64_t BlockOf(GgmlType t) { return GetGgmlTypeInfo(t).block_size; }

bool UseMoreBits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// The counters and facts llama-quantize keeps while choosing types.
struct PlanState {
  QuantFileType ftype;
  bool tied_embeddings = true;
  bool is_70b = false;
  uint32_t n_gqa = 0;
  int n_attention_wv = 0;
  int n_layer = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  // expert_count: llama-quantize gives the attention of 8-expert models
  // (Mixtral's count) more bits.
  uint32_t n_expert = 0;
};

// The layer of an ffn_down tensor: with experts, llama-quantize reads it
// from the name ("blk.N."), as a layer may hold several; else its count
// of the ffn_down tensors so far.
int FfnDownLayer(const PlanState& s, std::string_view name) {
  if (s.n_expert <= 1 || !name.starts_with("blk.")) return s.i_ffn_down;
  int layer = 0;
  size_t i = 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    layer = layer * 10 + (name[i] - '0');
  }
  return i == 4 ? s.i_ffn_down : layer;
}

GgmlType AttnVType(PlanState& s, GgmlType t) {
  using F = QuantFileType;
  const F f = s.ftype;
  if (f == F::kQ2_K) {
    t = s.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
  } else if (f == F::kQ3_K_M) {
    t = s.i_attention_wv < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  } else if (f == F::kQ3_K_L) {
    t = GgmlType::kQ5_K;
  } else if ((f == F::kIQ4_NL || f == F::kIQ4_XS) && s.n_gqa >= 4) {
    t = GgmlType::kQ5_K;
  } else if ((f == F::kQ4_K_M || f == F::kQ5_K_M) &&
             UseMoreBits(s.i_attention_wv, s.n_attention_wv)) {
    t = GgmlType::kQ6_K;
  } else if (f == F::kQ4_K_S && s.i_attention_wv < 4) {
    t = GgmlType::kQ5_K;
  }
  if (s.is_70b && (t == GgmlType::kQ3_K || t == GgmlType::kQ4_K)) {
    t = GgmlType::kQ5_K;
  }
  if (s.n_expert == 8) t = GgmlType::kQ8_0;
  ++s.i_attention_wv;
  return t;
}

GgmlType FfnDownType(PlanState& s, std::string_view name, GgmlType t) {
  using F = QuantFileType;
  const F f = s.ftype;
  const int i = FfnDownLayer(s, name);
  ++s.i_ffn_down;
  const int n = s.n_layer;
  if (f == F::kQ2_K) return GgmlType::kQ3_K;
  if (f == F::kQ3_K_M) return i < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  if (f == F::kQ3_K_L) return GgmlType::kQ5_K;
  if (f == F::kQ4_K_M) return UseMoreBits(i, n) ? GgmlType::kQ6_K : t;
  if (i < n / 8 && (f == F::kIQ4_NL || f == F::kIQ4_XS)) {
    return GgmlType::kQ5_K;
  }
  if (f == F::kQ5_K_M && UseMoreBits(i, n)) return GgmlType::kQ6_K;
  if (f == F::kQ4_K_S && i < n / 8) return GgmlType::kQ5_K;
  return t;
}

GgmlType AttnOutputType(const PlanState& s, GgmlType t) {
  if (s.n_expert == 8) {
    switch (s.ftype) {
      case QuantFileType::kQ2_K:
      case QuantFileType::kQ3_K_S:
      case QuantFileType::kQ3_K_M:
      case QuantFileType::kQ4_K_S:
      case QuantFileType::kQ4_K_M:
      case QuantFileType::kIQ4_NL:
      case QuantFileType::kIQ4_XS:
        return GgmlType::kQ5_K;
      default:
        return t;
    }
  }
  switch (s.ftype) {
    case QuantFileType::kQ2_K:
      return GgmlType::kQ3_K;
    case QuantFileType::kQ3_K_M:
      return GgmlType::kQ4_K;
    case QuantFileType::kQ3_K_L:
      return GgmlType::kQ5_K;
    default:
      return t;
  }
}

// llama_tensor_get_type_impl for the mixes above (no imatrix).
GgmlType MixType(PlanState& s, const PlanTensor& t, Category c, GgmlType type,
                 const QuantizePlanOptions& o) {
  if (c == Category::kOutput ||
      (s.tied_embeddings && c == Category::kTokenEmbd)) {
    if (o.output_tensor_type) return *o.output_tensor_type;
    if (t.shape[0] % BlockOf(type) != 0) return GgmlType::kQ8_0;
    return type != GgmlType::kQ8_0 ? GgmlType::kQ6_K : type;
  }
  switch (c) {
    case Category::kAttnV:
      return AttnVType(s, type);
    case Category::kFfnDown:
      return FfnDownType(s, t.name, type);
    case Category::kAttnK:
      return s.n_expert == 8 ? GgmlType::kQ8_0 : type;
    case Category::kAttnOutput:
      return AttnOutputType(s, type);
    default:
      return type;
  }
}

// tensor_type_fallback: a type whose block divides the rows.
StatusOr<GgmlType> Fallback(const PlanTensor& t, GgmlType type,
                            bool* fell_back) {
  const uint64_t ncols = t.shape[0];
  if (ncols % BlockOf(type) == 0) return type;
  *fell_back = true;
  GgmlType other;
  switch (type) {
    case GgmlType::kIQ4_XS:
      other = GgmlType::kIQ4_NL;
      break;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      other = GgmlType::kQ4_0;
      break;
    case GgmlType::kQ4_K:
      other = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      other = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      other = GgmlType::kQ8_0;
      break;
    default:
      return InvalidArgumentError(
          "tensor " + t.name + " has rows of " + std::to_string(ncols) +
          " values, not a multiple of type " + std::string(GgmlTypeName(type)) +
          "'s block of " + std::to_string(BlockOf(type)) +
          ", and that type has no fallback");
  }
  return ncols % BlockOf(other) == 0 ? other : GgmlType::kF16;
}

}  // namespace

StatusOr<QuantFileType> ParseQuantFileType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  if (upper == "Q3_K") upper = "Q3_K_M";
  if (upper == "Q4_K") upper = "Q4_K_M";
  if (upper == "Q5_K") upper = "Q5_K_M";
  std::string known;
  for (const FileTypeName& r : kFileTypes) {
    if (r.name == upper) return r.ftype;
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  return InvalidArgumentError("unknown quantization type '" +
                              std::string(name) + "' (known: " + known + ")");
}

std::string_view QuantFileTypeName(QuantFileType ftype) {
  return Row(ftype).name;
}

GgmlType QuantFileTypeBaseType(QuantFileType ftype) { return Row(ftype).base; }

StatusOr<QuantFileType> QuantFileTypeForBaseType(GgmlType type) {
  if (type == GgmlType::kQ3_K) return QuantFileType::kQ3_K_M;
  if (type == GgmlType::kQ4_K) return QuantFileType::kQ4_K_M;
  if (type == GgmlType::kQ5_K) return QuantFileType::kQ5_K_M;
  for (const FileTypeName& r : kFileTypes) {
    if (r.base == type) return r.ftype;
  }
  return InvalidArgumentError("no quantization mix is based on type " +
                              std::string(GgmlTypeName(type)));
}

std::vector<size_t> LlamaQuantizeOrder(const std::vector<PlanTensor>& tensors) {
  auto layer = [](const std::string& name) -> long {
    if (!name.starts_with("blk.")) return -1;
    size_t i = 4;
    long v = 0;
    while (i < name.size() &&
           std::isdigit(static_cast<unsigned char>(name[i]))) {
      v = v * 10 + (name[i++] - '0');
    }
    return i == 4 ? -1 : v;
  };
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const long la = layer(tensors[a].name);
    const long lb = layer(tensors[b].name);
    if (la != lb) return la < lb;
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

StatusOr<std::vector<PlannedType>> PlanQuantization(
    const std::vector<PlanTensor>& tensors, const QuantizeModelShape& model,
    const QuantizePlanOptions& options) {
  if (model.architecture == "falcon") {
    return InvalidArgumentError(
        "quantize: architecture falcon is not supported");
  }
  PlanState s;
  s.ftype = options.ftype;
  s.n_layer = static_cast<int>(model.n_layer);
  s.n_expert = model.n_expert;
  s.n_gqa = model.n_head_kv == 0 ? 0 : model.n_head / model.n_head_kv;
  s.is_70b = model.architecture == "llama" && model.n_layer == 80 &&
             model.n_head != model.n_head_kv;
  for (const PlanTensor& t : tensors) {
    const Category c = Categorize(t.name);
    if (c == Category::kAttnV) ++s.n_attention_wv;
    if (c == Category::kOutput) s.tied_embeddings = false;
  }
  const GgmlType base = QuantFileTypeBaseType(options.ftype);
  std::vector<PlannedType> result(tensors.size());
  for (size_t i : LlamaQuantizeOrder(tensors)) {
    const PlanTensor& t = tensors[i];
    PlannedType& r = result[i];
    r.type = t.type;
    if (!AllowsQuantization(t)) continue;
    r.quantized = true;
    const Category c = Categorize(t.name);
    if (options.token_embedding_type && c == Category::kTokenEmbd) {
      r.type = *options.token_embedding_type;
      continue;
    }
    if (options.output_tensor_type && c == Category::kOutput) {
      r.type = *options.output_tensor_type;
      continue;
    }
    r.type = base;
    if (!IsQuantized(base)) continue;
    if (!options.pure) r.type = MixType(s, t, c, base, options);
    KV_ASSIGN_OR_RETURN(r.type, Fallback(t, r.type, &r.fell_back));
  }
  return result;
}

}  // namespace kvault
