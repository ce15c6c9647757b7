#include "model/gen_model.h"

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/llama_hparams.h"
#include "model/quantize.h"

namespace kvault {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna), seeded through splitmix64 as its authors
// recommend; then Box-Muller for normals (both outputs used).
class NormalStream {
 public:
  NormalStream(uint64_t seed, std::string_view name) {
    uint64_t sm = seed ^ Xxh3_64(name.data(), name.size());
    for (uint64_t& s : s_) s = SplitMix64(&sm);
  }

  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]: log stays finite
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t NextU64() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

struct TensorPlan {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> shape;  // ggml order: ne0 = input dim
  bool is_norm;
};

// One layer's FFN matrices: dense, or the router and the 3-D expert
// tensors [ne0, ne1, n_expert] of a mixture of experts.
void PlanFfn(const GenModelOptions& o, const std::string& p,
             std::vector<TensorPlan>* plan) {
  const uint64_t e = o.n_embd;
  if (o.n_expert == 0) {
    plan->push_back({p + "ffn_gate.weight", o.type, {e, o.n_ff}, false});
    plan->push_back({p + "ffn_down.weight", o.type, {o.n_ff, e}, false});
    plan->push_back({p + "ffn_up.weight", o.type, {e, o.n_ff}, false});
    return;
  }
  const uint64_t x = o.n_expert;
  plan->push_back({p + "ffn_gate_inp.weight", GgmlType::kF32, {e, x}, false});
  plan->push_back({p + "ffn_gate_exps.weight", o.type, {e, o.n_ff, x}, false});
  plan->push_back({p + "ffn_down_exps.weight", o.type, {o.n_ff, e, x}, false});
  plan->push_back({p + "ffn_up_exps.weight", o.type, {e, o.n_ff, x}, false});
}

// The llama.cpp llama-architecture tensor set, in convert_hf_to_gguf order.
std::vector<TensorPlan> PlanTensors(const GenModelOptions& o, uint32_t n_kv,
                                    uint32_t n_vocab) {
  const uint64_t e = o.n_embd;
  const uint64_t kv = uint64_t{n_kv} * (o.n_embd / o.n_head);
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", o.type, {e, n_vocab}, false});
  for (uint32_t l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    plan.push_back({p + "attn_norm.weight", GgmlType::kF32, {e}, true});
    plan.push_back({p + "attn_q.weight", o.type, {e, e}, false});
    plan.push_back({p + "attn_k.weight", o.type, {e, kv}, false});
    plan.push_back({p + "attn_v.weight", o.type, {e, kv}, false});
    plan.push_back({p + "attn_output.weight", o.type, {e, e}, false});
    plan.push_back({p + "ffn_norm.weight", GgmlType::kF32, {e}, true});
    PlanFfn(o, p, &plan);
  }
  plan.push_back({"output_norm.weight", GgmlType::kF32, {e}, true});
  plan.push_back({"output.weight", o.type, {e, n_vocab}, false});
  return plan;
}

// Gives each matrix llama-quantize's type for `mix` (the tensors are f32
// before quantization).
Status ApplyMix(QuantFileType mix, const GenModelOptions& o, uint32_t n_kv,
                std::vector<TensorPlan>* plan) {
  std::vector<PlanTensor> tensors;
  for (const TensorPlan& t : *plan) {
    tensors.push_back({t.name, t.shape, GgmlType::kF32});
  }
  QuantizePlanOptions options;
  options.ftype = mix;
  KV_ASSIGN_OR_RETURN(
      std::vector<PlannedType> types,
      PlanQuantization(
          tensors, {"llama", o.n_layer, o.n_head, n_kv, o.n_expert}, options));
  for (size_t i = 0; i < plan->size(); ++i) (*plan)[i].type = types[i].type;
  return Status::Ok();
}

Status ValidateOptions(const GenModelOptions& o, uint32_t n_kv) {
  if (!QuantFileTypeForBaseType(o.type).ok()) {
    return InvalidArgumentError(
        "gen-model: --type must be f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
        "q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs or a mix name "
        "(q4_k_m, ...), got " +
        std::string(GgmlTypeName(o.type)));
  }
  if (o.n_head == 0 || o.n_embd % o.n_head != 0) {
    return InvalidArgumentError(
        "gen-model: n_embd " + std::to_string(o.n_embd) +
        " is not a multiple of n_head " + std::to_string(o.n_head));
  }
  const uint32_t block = GetGgmlTypeInfo(o.type).block_size;
  if (!o.mix && (o.n_embd % block != 0 || o.n_ff % block != 0)) {
    return InvalidArgumentError(
        "gen-model: type " + std::string(GgmlTypeName(o.type)) +
        " needs n_embd (" + std::to_string(o.n_embd) + ") and n_ff (" +
        std::to_string(o.n_ff) + ") to be multiples of " +
        std::to_string(block));
  }
  LlamaHparams h;
  h.architecture = "llama";
  h.n_embd = o.n_embd;
  h.n_layer = o.n_layer;
  h.n_head = o.n_head;
  h.n_head_kv = n_kv;
  h.n_ff = o.n_ff;
  h.n_ctx_train = o.n_ctx;
  h.n_embd_head_k = h.n_embd_head_v = h.n_rot = o.n_embd / o.n_head;
  h.n_vocab = 1;  // checked once the vocab is known
  h.rope_freq_base = o.rope_freq_base;
  h.rms_norm_eps = o.rms_norm_eps;
  h.n_expert = o.n_expert;
  h.n_expert_used = o.n_expert_used;
  h.n_ff_exp = o.n_expert > 0 ? o.n_ff : 0;
  return ValidateLlamaHparams(h).WithContext("gen-model");
}

// A SentencePiece-style vocab of the 256 byte tokens behind <unk>, <s>,
// </s>, with llama.cpp's token types (1 normal, 2 unknown, 3 control,
// 6 byte), so any text tokenizes through byte fallback.
std::vector<GgufMetadataEntry> ByteVocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  const std::vector<float> scores(tokens.size(), 0.0f);
  return {
      {"tokenizer.ggml.model", GgufValue::String("llama")},
      {"tokenizer.ggml.pre", GgufValue::String("default")},
      {"tokenizer.ggml.tokens", GgufValue::StringArray(std::move(tokens))},
      {"tokenizer.ggml.scores", GgufValue::Float32Array(scores)},
      {"tokenizer.ggml.token_type", GgufValue::Int32Array(types)},
      {"tokenizer.ggml.bos_token_id", GgufValue::Uint32(1)},
      {"tokenizer.ggml.eos_token_id", GgufValue::Uint32(2)},
      {"tokenizer.ggml.unknown_token_id", GgufValue::Uint32(0)},
      {"tokenizer.ggml.add_bos_token", GgufValue::Bool(true)},
      {"tokenizer.ggml.add_eos_token", GgufValue::Bool(false)},
  };
}

StatusOr<std::vector<GgufMetadataEntry>> CopyVocab(const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  std::vector<GgufMetadataEntry> entries;
  for (const GgufMetadataEntry& e : file->metadata()) {
    if (e.key.starts_with("tokenizer.")) entries.push_back(e);
  }
  const GgufValue* tokens = file->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->array_size() == 0) {
    return InvalidArgumentError("gen-model: vocab file " + path +
                                " has no tokenizer.ggml.tokens");
  }
  return entries;
}

uint32_t VocabSize(const std::vector<GgufMetadataEntry>& vocab) {
  for (const GgufMetadataEntry& e : vocab) {
    if (e.key == "tokenizer.ggml.tokens") {
      return static_cast<uint32_t>(e.value.array_size());
    }
  }
  return 0;
}

// llama.cpp's llama_ftype (general.file_type) of the options: the mix's,
// or the one llama-quantize --pure writes for the type (q4_K: Q4_K_M).
uint32_t FileType(const GenModelOptions& o) {
  if (o.mix) return static_cast<uint32_t>(*o.mix);
  StatusOr<QuantFileType> ftype = QuantFileTypeForBaseType(o.type);
  return ftype.ok() ? static_cast<uint32_t>(*ftype) : 0;
}

bool IsQuantizedModel(const GenModelOptions& o) {
  return o.mix || (o.type != GgmlType::kF32 && o.type != GgmlType::kF16 &&
                   o.type != GgmlType::kBF16);
}

Status AddModelMetadata(const GenModelOptions& o, uint32_t n_kv,
                        uint32_t n_vocab, GgufWriter* w) {
  KV_RETURN_IF_ERROR(
      w->AddMetadata("general.architecture", GgufValue::String("llama")));
  KV_RETURN_IF_ERROR(w->AddMetadata("general.name", GgufValue::String(o.name)));
  KV_RETURN_IF_ERROR(w->AddMetadata("general.alignment",
                                    GgufValue::Uint32(kGgufDefaultAlignment)));
  KV_RETURN_IF_ERROR(
      w->AddMetadata("general.file_type", GgufValue::Uint32(FileType(o))));
  if (IsQuantizedModel(o)) {
    KV_RETURN_IF_ERROR(
        w->AddMetadata("general.quantization_version", GgufValue::Uint32(2)));
  }
  const std::pair<const char*, uint32_t> ints[] = {
      {"llama.context_length", o.n_ctx},
      {"llama.embedding_length", o.n_embd},
      {"llama.block_count", o.n_layer},
      {"llama.feed_forward_length", o.n_ff},
      {"llama.attention.head_count", o.n_head},
      {"llama.attention.head_count_kv", n_kv},
      {"llama.rope.dimension_count", o.n_embd / o.n_head},
      {"llama.vocab_size", n_vocab},
  };
  for (const auto& [key, value] : ints) {
    KV_RETURN_IF_ERROR(w->AddMetadata(key, GgufValue::Uint32(value)));
  }
  if (o.n_expert > 0) {
    KV_RETURN_IF_ERROR(
        w->AddMetadata("llama.expert_count", GgufValue::Uint32(o.n_expert)));
    KV_RETURN_IF_ERROR(w->AddMetadata("llama.expert_used_count",
                                      GgufValue::Uint32(o.n_expert_used)));
  }
  KV_RETURN_IF_ERROR(w->AddMetadata("llama.rope.freq_base",
                                    GgufValue::Float32(o.rope_freq_base)));
  return w->AddMetadata("llama.attention.layer_norm_rms_epsilon",
                        GgufValue::Float32(o.rms_norm_eps));
}

// Streams one tensor's values, a bounded number of rows at a time.
Status WriteTensor(const TensorPlan& t, uint64_t seed, GgufWriter* w) {
  const uint64_t ne0 = t.shape[0];
  uint64_t rows = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
  const uint64_t chunk_rows = std::max<uint64_t>(1, (uint64_t{1} << 18) / ne0);
  NormalStream normal(seed, t.name);
  std::vector<float> values;     // [chunk_rows, ne0]
  std::vector<std::byte> bytes;  // the same rows encoded in t.type
  for (uint64_t r = 0; r < rows; r += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, rows - r) * ne0;
    values.resize(n);
    for (float& v : values) {
      v = t.is_norm ? 1.0f : static_cast<float>(0.02 * normal.Next());
    }
    KV_ASSIGN_OR_RETURN(uint64_t num_bytes, GgmlRowBytes(t.type, n));
    bytes.resize(num_bytes);
    KV_RETURN_IF_ERROR(QuantizeRow(t.type, values, bytes));
    KV_RETURN_IF_ERROR(w->AppendTensorData(bytes));
  }
  return Status::Ok();
}

}  // namespace

void FillStandardNormal(uint64_t seed, std::string_view name,
                        std::span<float> out) {
  NormalStream normal(seed, name);
  for (float& v : out) v = static_cast<float>(normal.Next());
}

StatusOr<GenModelResult> GenerateLlamaModel(const GenModelOptions& options,
                                            WritableFile* out) {
  const uint32_t n_kv =
      options.n_head_kv == 0 ? options.n_head : options.n_head_kv;
  KV_RETURN_IF_ERROR(ValidateOptions(options, n_kv));
  std::vector<GgufMetadataEntry> vocab;
  if (options.vocab == kGenModelByteVocab) {
    vocab = ByteVocab();
  } else {
    KV_ASSIGN_OR_RETURN(vocab, CopyVocab(options.vocab));
  }
  GenModelResult result;
  result.n_vocab = VocabSize(vocab);
  if (result.n_vocab > kMaxVocab) {
    return InvalidArgumentError("gen-model: vocabulary of " +
                                std::to_string(result.n_vocab) +
                                " tokens is over the limit");
  }
  GgufWriter writer(out);
  KV_RETURN_IF_ERROR(AddModelMetadata(options, n_kv, result.n_vocab, &writer));
  for (GgufMetadataEntry& e : vocab) {
    KV_RETURN_IF_ERROR(
        writer.AddMetadata(std::move(e.key), std::move(e.value)));
  }
  std::vector<TensorPlan> plan = PlanTensors(options, n_kv, result.n_vocab);
  if (options.mix) {
    KV_RETURN_IF_ERROR(
        ApplyMix(*options.mix, options, n_kv, &plan).WithContext("gen-model"));
  }
  for (const TensorPlan& t : plan) {
    KV_RETURN_IF_ERROR(writer.AddTensorInfo(t.name, t.type, t.shape));
  }
  KV_RETURN_IF_ERROR(writer.WriteHeader());
  for (size_t i = 0; i < plan.size(); ++i) {
    KV_RETURN_IF_ERROR(WriteTensor(plan[i], options.seed, &writer));
    result.num_parameters += writer.tensors()[i].num_elements;
  }
  KV_RETURN_IF_ERROR(writer.Finish());
  result.num_tensors = plan.size();
  result.file_bytes = writer.bytes_written();
  return result;
}

StatusOr<GenModelResult> GenerateLlamaModelFile(Env* env,
                                                const GenModelOptions& options,
                                                const std::string& path) {
  const std::string tmp = path + ".tmp";
  StatusOr<GenModelResult> result = [&]() -> StatusOr<GenModelResult> {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                        env->NewWritableFile(tmp));
    KV_ASSIGN_OR_RETURN(GenModelResult r,
                        GenerateLlamaModel(options, file.get()));
    KV_RETURN_IF_ERROR(file->Sync());
    KV_RETURN_IF_ERROR(file->Close());
    KV_RETURN_IF_ERROR(env->RenameFile(tmp, path));
    KV_RETURN_IF_ERROR(env->SyncDir(DirName(path)));
    return r;
  }();
  if (!result.ok()) {
    (void)env->RemoveFile(tmp);
    return result.status().WithContext("writing " + path);
  }
  return result;
}

}  // namespace kvault
