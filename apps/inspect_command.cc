// `kvault inspect FILE [--metadata]`: summarises a GGUF model (architecture,
// hyperparameters, tokenizer, tensors, size, fingerprint) or a kvault state
// file's header.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "apps/commands.h"
#include "core/env.h"
#include "core/flags.h"
#include "kv/slot_file.h"
#include "kv/state_file.h"
#include "kv/state_format.h"
#include "model/arch_spec.h"
#include "model/gguf_file.h"
#include "model/llama_hparams.h"
#include "model/llama_model.h"
#include "model/model_fingerprint.h"
#include "model/quantize_plan.h"

namespace kvault::apps {
namespace {

constexpr const char kInspectUsage[] =
    "usage: kvault inspect FILE [--metadata]\n"
    "  a GGUF model: architecture, hyperparameters, tokenizer, tensor types,\n"
    "  size and fingerprint (--metadata also lists every metadata key);\n"
    "  a kvault state file: its header.\n";

// Returns the value of `key` rendered, or "-" when absent.
std::string Show(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return "-";
  if (v->type() == GgufType::kString) return std::string(v->string_view());
  return v->DebugString();
}

void PrintTokenizer(const GgufFile& f) {
  const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
  std::printf(
      "tokenizer:     model=%s pre=%s vocab=%llu bos=%s eos=%s "
      "unk=%s add_bos=%s merges=%llu\n",
      Show(f, "tokenizer.ggml.model").c_str(),
      Show(f, "tokenizer.ggml.pre").c_str(),
      static_cast<unsigned long long>(tokens ? tokens->array_size() : 0),
      Show(f, "tokenizer.ggml.bos_token_id").c_str(),
      Show(f, "tokenizer.ggml.eos_token_id").c_str(),
      Show(f, "tokenizer.ggml.unknown_token_id").c_str(),
      Show(f, "tokenizer.ggml.add_bos_token").c_str(),
      static_cast<unsigned long long>(
          f.Has("tokenizer.ggml.merges")
              ? f.Find("tokenizer.ggml.merges")->array_size()
              : 0));
}

void PrintTensors(const GgufFile& f) {
  std::map<std::string_view, int> per_type;
  uint64_t params = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    ++per_type[GgmlTypeName(t.type)];
    params += t.num_elements;
  }
  std::string types;
  for (const auto& [name, count] : per_type) {
    types += (types.empty() ? "" : ", ") + std::string(name) + " " +
             std::to_string(count);
  }
  std::printf("tensors:       %zu (%s), %llu parameters\n", f.tensors().size(),
              types.c_str(), static_cast<unsigned long long>(params));
}

// The type mix: each type's tensor count and bytes, largest first, and the
// llama-quantize mix that general.file_type names.
void PrintTypeMix(const GgufFile& f) {
  std::map<GgmlType, std::pair<int, uint64_t>> per_type;
  for (const GgufTensorInfo& t : f.tensors()) {
    ++per_type[t.type].first;
    per_type[t.type].second += t.size_bytes;
  }
  std::vector<std::pair<GgmlType, std::pair<int, uint64_t>>> sorted(
      per_type.begin(), per_type.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.second > b.second.second;
                   });
  std::string mix;
  for (const auto& [type, count_bytes] : sorted) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %d tensors (%.2f MiB)",
                  mix.empty() ? "" : ", ",
                  std::string(GgmlTypeName(type)).c_str(), count_bytes.first,
                  static_cast<double>(count_bytes.second) / (1 << 20));
    mix += buf;
  }
  StatusOr<uint64_t> ftype = f.GetUint("general.file_type");
  std::string ftype_name = "-";
  if (ftype.ok()) {
    ftype_name = std::to_string(*ftype);
    for (std::string_view name :
         {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
          "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
          "Q6_K", "IQ4_NL", "IQ4_XS"}) {
      StatusOr<QuantFileType> t = ParseQuantFileType(name);
      if (t.ok() && static_cast<uint64_t>(*t) == *ftype) {
        ftype_name = std::string(name) + " (" + ftype_name + ")";
      }
    }
  }
  std::printf("types:         %s\n", mix.c_str());
  std::printf("file type:     %s\n", ftype_name.c_str());
}

// One line naming the architecture's features (ArchSpec) with the values
// the file gives them: the sliding window and its layers, the soft-caps,
// Llama 3.1's RoPE frequency factors.
void PrintFeatures(const GgufFile& f, LlamaHparams h) {
  StatusOr<ArchSpec> spec = FindArchSpec(h.architecture);
  Status read = spec.ok() ? ReadArchHparams(f, *spec, &h) : spec.status();
  if (!read.ok()) {
    std::printf("features:      %s\n", read.ToString().c_str());
    return;
  }
  std::string line;
  for (const std::string& name : ArchFeatureNames(*spec)) {
    line += (line.empty() ? "" : ", ") + name;
  }
  char buf[160];
  if (spec->swa_pattern > 0 && h.n_swa > 0) {
    const uint32_t pattern = h.swa_pattern ? h.swa_pattern : spec->swa_pattern;
    std::snprintf(buf, sizeof(buf),
                  "; window %u tokens on %u of every %u layers", h.n_swa,
                  pattern - 1, pattern);
    line += buf;
  }
  if (spec->softcap) {
    std::snprintf(buf, sizeof(buf), "; soft-caps attention %g, final %g",
                  h.attn_softcap, h.final_softcap);
    line += buf;
  }
  if (h.n_expert > 0) {
    std::snprintf(
        buf, sizeof(buf), "%smixture of experts: %u of width %u, %u per token",
        line.empty() ? "" : "; ", h.n_expert, h.n_ff_exp, h.n_expert_used);
    line += buf;
  }
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    line += std::string(line.empty() ? "" : "; ") +
            "rope_freqs (Llama 3.1 RoPE scaling)";
  }
  std::printf("features:      %s\n", line.empty() ? "-" : line.c_str());
}

int InspectGguf(const std::string& path, bool all_metadata) {
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "kvault inspect: %s\n",
                 file.status().ToString().c_str());
    return 1;
  }
  const GgufFile& f = **file;
  std::printf("file:          %s\n", path.c_str());
  std::printf(
      "format:        GGUF v%u, %llu bytes, alignment %llu, %zu "
      "metadata keys\n",
      f.version(), static_cast<unsigned long long>(f.file_size()),
      static_cast<unsigned long long>(f.alignment()), f.metadata().size());
  std::printf("architecture:  %s\n", Show(f, "general.architecture").c_str());
  std::printf("name:          %s\n", Show(f, "general.name").c_str());
  StatusOr<LlamaHparams> h = ReadLlamaHparams(f);
  std::printf("hparams:       %s\n",
              h.ok() ? h->ToString().c_str() : h.status().ToString().c_str());
  if (h.ok()) PrintFeatures(f, *h);
  PrintTokenizer(f);
  PrintTensors(f);
  PrintTypeMix(f);
  std::printf("fingerprint:   %s\n",
              ComputeModelFingerprint(f).ToHex().c_str());
  if (all_metadata) {
    for (const GgufMetadataEntry& e : f.metadata()) {
      std::printf("  %s = %s\n", e.key.c_str(), e.value.DebugString().c_str());
    }
  }
  return 0;
}

// Opens the state file at `path`, behind its token header when it is a
// slot file; *header gets what the header says.
StatusOr<std::unique_ptr<RandomAccessFile>> OpenState(const std::string& path,
                                                      SlotFileHeader* header) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                      Env::Default()->NewRandomAccessFile(path));
  KV_ASSIGN_OR_RETURN(*header, ReadSlotFileHeader(*file));
  return FileSuffix(std::move(file), header->body_offset);
}

int InspectState(const std::string& path) {
  SlotFileHeader slot;
  StatusOr<std::unique_ptr<RandomAccessFile>> file = OpenState(path, &slot);
  StatusOr<StateHeader> h = file.ok() ? ReadStateHeader(**file)
                                      : StatusOr<StateHeader>(file.status());
  if (!h.ok()) {
    std::fprintf(stderr, "kvault inspect: %s: %s\n", path.c_str(),
                 h.status().ToString().c_str());
    return 1;
  }
  std::printf("file:          %s\n", path.c_str());
  if (slot.body_offset > 0) {
    std::printf("token header:  llama.cpp's, %s, %zu tokens, %llu bytes\n",
                slot.packed ? "packed" : "plain list", slot.tokens.size(),
                static_cast<unsigned long long>(slot.body_offset));
  }
  std::printf("format:        kvault state file v%u, %llu bytes\n",
              h->format_version,
              static_cast<unsigned long long>(h->file_bytes()));
  std::printf("producer:      %s\n", h->producer.c_str());
  std::printf("fingerprint:   %s\n", h->fingerprint.ToHex().c_str());
  std::printf("layout:        %s\n", h->layout.ToString().c_str());
  std::printf("tokens:        %llu in %llu chunks of %u\n",
              static_cast<unsigned long long>(h->num_tokens),
              static_cast<unsigned long long>(h->num_chunks()),
              h->tokens_per_chunk);
  return 0;
}

// Returns true when `path` starts with the state-file magic, or with a
// slot file's token header.
bool IsStateFile(const std::string& path) {
  StatusOr<std::unique_ptr<RandomAccessFile>> file =
      Env::Default()->NewRandomAccessFile(path);
  if (!file.ok()) return false;
  char magic[sizeof(kStateMagic)];
  StatusOr<size_t> n = (*file)->ReadAt(
      0, std::as_writable_bytes(std::span(magic, sizeof(magic))));
  if (!n.ok() || *n < 4) return false;
  uint32_t word = 0;
  for (int i = 0; i < 4; ++i) word |= uint32_t(uint8_t(magic[i])) << (8 * i);
  return word == kLlamaSeqMagic ||
         (*n == sizeof(magic) &&
          std::memcmp(magic, kStateMagic, sizeof(magic)) == 0);
}

}  // namespace

int RunInspect(const std::vector<std::string>& args) {
  StatusOr<Flags> flags = Flags::Parse(args, {"metadata", "help"});
  Status s =
      flags.ok() ? flags->CheckKnown({"metadata", "help"}) : flags.status();
  if (s.ok() && flags->Has("help")) {
    std::fputs(kInspectUsage, stdout);
    return 0;
  }
  if (s.ok() && flags->positional().size() != 1) {
    s = InvalidArgumentError("inspect takes exactly one FILE");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "kvault inspect: %s\n%s", s.ToString().c_str(),
                 kInspectUsage);
    return 2;
  }
  const std::string& path = flags->positional()[0];
  if (IsStateFile(path)) return InspectState(path);
  return InspectGguf(path, flags->Has("metadata"));
}

}  // namespace kvault::apps
