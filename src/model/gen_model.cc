#include "model/gen_model.h"

#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "model/arch_spec.h"
#include "model/gen_model_tensors.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/llama_hparams.h"
#include "model/quantize.h"

namespace kvault {
namespace {

using gen_model_internal::Fill;
using gen_model_internal::PlanTensors;
using gen_model_internal::RopeFactor;
using gen_model_internal::TensorPlan;

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
      PlanQuantization(tensors, {o.arch, o.n_layer, o.n_head, n_kv, o.n_expert},
                       options));
  for (size_t i = 0; i < plan->size(); ++i) (*plan)[i].type = types[i].type;
  return Status::Ok();
}

// The sizes and counts as a model file would hold them, checked as a
// loader checks them.
Status ValidateHparams(const GenModelOptions& o, uint32_t n_kv) {
  LlamaHparams h;
  h.architecture = o.arch;
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

Status ValidateOptions(const GenModelOptions& o, const ArchSpec& spec,
                       uint32_t n_kv) {
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
  if (o.rope_freqs && !spec.rope_freq_factors) {
    return InvalidArgumentError(
        "gen-model: --rope-freqs is for --arch llama "
        "(Llama 3.1 RoPE scaling), not " +
        o.arch);
  }
  if (o.sliding_window != 0 && spec.swa_pattern == 0) {
    return InvalidArgumentError("gen-model: --sliding-window is for gemma2 "
                                "and gemma3, not " + o.arch);
  }
  if ((o.n_expert > 0 && spec.moe == MoeSupport::kNone) ||
      (o.n_expert == 0 && spec.moe == MoeSupport::kRequired)) {
    return InvalidArgumentError(
        "gen-model: architecture " + o.arch + " cannot have " +
        std::to_string(o.n_expert) + " experts (" +
        (spec.moe == MoeSupport::kNone ? "dense only" : "experts only") + ")");
  }
  return ValidateHparams(o, n_kv);
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

Status AddGeneralMetadata(const GenModelOptions& o, GgufWriter* w) {
  KV_RETURN_IF_ERROR(
      w->AddMetadata("general.architecture", GgufValue::String(o.arch)));
  KV_RETURN_IF_ERROR(w->AddMetadata("general.name", GgufValue::String(o.name)));
  KV_RETURN_IF_ERROR(w->AddMetadata("general.alignment",
                                    GgufValue::Uint32(kGgufDefaultAlignment)));
  KV_RETURN_IF_ERROR(
      w->AddMetadata("general.file_type", GgufValue::Uint32(FileType(o))));
  if (!IsQuantizedModel(o)) return Status::Ok();
  return w->AddMetadata("general.quantization_version", GgufValue::Uint32(2));
}

// The keys of `spec`'s features: soft-capping (gemma2's defaults) and the
// sliding window.
Status AddFeatureMetadata(const GenModelOptions& o, const ArchSpec& spec,
                          GgufWriter* w) {
  const std::string a = o.arch + ".";
  if (spec.softcap) {
    KV_RETURN_IF_ERROR(w->AddMetadata(a + "attn_logit_softcapping",
                                      GgufValue::Float32(50.0f)));
    KV_RETURN_IF_ERROR(w->AddMetadata(a + "final_logit_softcapping",
                                      GgufValue::Float32(30.0f)));
  }
  if (spec.swa_pattern == 0) return Status::Ok();
  const uint32_t window =
      o.sliding_window != 0 ? o.sliding_window : std::max(1u, o.n_ctx / 4);
  KV_RETURN_IF_ERROR(w->AddMetadata(a + "attention.sliding_window",
                                    GgufValue::Uint32(window)));
  if (spec.swa_rope_freq_base <= 0.0f) return Status::Ok();
  return w->AddMetadata(a + "rope.freq_base_swa",
                        GgufValue::Float32(spec.swa_rope_freq_base));
}

// The expert counts of a mixture of experts (and qwen3moe's expert width,
// which would otherwise default to n_ff / n_expert_used).
Status AddExpertMetadata(const GenModelOptions& o, const ArchSpec& spec,
                         GgufWriter* w) {
  if (o.n_expert == 0) return Status::Ok();
  const std::string a = o.arch + ".";
  KV_RETURN_IF_ERROR(
      w->AddMetadata(a + "expert_count", GgufValue::Uint32(o.n_expert)));
  KV_RETURN_IF_ERROR(w->AddMetadata(a + "expert_used_count",
                                    GgufValue::Uint32(o.n_expert_used)));
  if (!spec.expert_ff_length) return Status::Ok();
  return w->AddMetadata(a + "expert_feed_forward_length",
                        GgufValue::Uint32(o.n_ff));
}

Status AddModelMetadata(const GenModelOptions& o, const ArchSpec& spec,
                        uint32_t n_kv, uint32_t n_vocab, GgufWriter* w) {
  KV_RETURN_IF_ERROR(AddGeneralMetadata(o, w));
  const std::string a = o.arch + ".";
  const uint32_t head_dim = o.n_embd / o.n_head;
  const std::pair<const char*, uint32_t> ints[] = {
      {"context_length", o.n_ctx},        {"embedding_length", o.n_embd},
      {"block_count", o.n_layer},         {"feed_forward_length", o.n_ff},
      {"attention.head_count", o.n_head}, {"attention.head_count_kv", n_kv},
      {"attention.key_length", head_dim}, {"attention.value_length", head_dim},
      {"rope.dimension_count", head_dim}, {"vocab_size", n_vocab},
  };
  for (const auto& [key, value] : ints) {
    KV_RETURN_IF_ERROR(w->AddMetadata(a + key, GgufValue::Uint32(value)));
  }
  KV_RETURN_IF_ERROR(AddExpertMetadata(o, spec, w));
  KV_RETURN_IF_ERROR(w->AddMetadata(a + "rope.freq_base",
                                    GgufValue::Float32(o.rope_freq_base)));
  KV_RETURN_IF_ERROR(w->AddMetadata(a + "attention.layer_norm_rms_epsilon",
                                    GgufValue::Float32(o.rms_norm_eps)));
  return AddFeatureMetadata(o, spec, w);
}

// Streams one tensor's values, a bounded number of rows at a time.
Status WriteTensor(const TensorPlan& t, const GenModelOptions& o,
                   GgufWriter* w) {
  const uint64_t ne0 = t.shape[0];
  uint64_t rows = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
  const uint64_t chunk_rows = std::max<uint64_t>(1, (uint64_t{1} << 18) / ne0);
  NormalStream normal(o.seed, t.name);
  std::vector<float> values;     // [chunk_rows, ne0]
  std::vector<std::byte> bytes;  // the same rows encoded in t.type
  for (uint64_t r = 0; r < rows; r += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, rows - r) * ne0;
    values.resize(n);
    for (size_t i = 0; i < values.size(); ++i) {
      switch (t.fill) {
        case Fill::kNormal:
          values[i] = static_cast<float>(0.02 * normal.Next());
          break;
        case Fill::kOnes:
          values[i] = 1.0f;
          break;
        case Fill::kRopeFactors:
          values[i] = RopeFactor(i, ne0, o.rope_freq_base);
          break;
      }
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
  KV_ASSIGN_OR_RETURN(const ArchSpec spec, FindArchSpec(options.arch));
  KV_RETURN_IF_ERROR(ValidateOptions(options, spec, n_kv));
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
  KV_RETURN_IF_ERROR(
      AddModelMetadata(options, spec, n_kv, result.n_vocab, &writer));
  for (GgufMetadataEntry& e : vocab) {
    KV_RETURN_IF_ERROR(
        writer.AddMetadata(std::move(e.key), std::move(e.value)));
  }
  std::vector<TensorPlan> plan =
      PlanTensors(options, spec, n_kv, result.n_vocab);
  if (options.mix) {
    KV_RETURN_IF_ERROR(
        ApplyMix(*options.mix, options, n_kv, &plan).WithContext("gen-model"));
  }
  for (const TensorPlan& t : plan) {
    KV_RETURN_IF_ERROR(writer.AddTensorInfo(t.name, t.type, t.shape));
  }
  KV_RETURN_IF_ERROR(writer.WriteHeader());
  for (size_t i = 0; i < plan.size(); ++i) {
    KV_RETURN_IF_ERROR(WriteTensor(plan[i], options, &writer));
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
