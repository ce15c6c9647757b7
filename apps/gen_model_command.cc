// `kvault gen-model ...`: writes a random-weight GGUF of a Llama-family
// architecture (flags only; the
// generator lives in model/gen_model).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/flags.h"
#include "model/gen_model.h"
#include "model/gguf_file.h"
#include "model/model_fingerprint.h"

namespace kvault::apps {
namespace {

constexpr const char kGenModelUsage[] =
    "usage: kvault gen-model [--arch A] [--n-embd E] [--n-layer L]\n"
    "         [--n-head H] [--n-head-kv K] [--n-ff F] [--ctx C]\n"
    "         [--type T] [--vocab FILE.gguf|bytes] [--rope-freqs]\n"
    "         [--sliding-window W] [--n-expert N --n-expert-used U]\n"
    "         [--seed S] [--name NAME] -o out.gguf\n"
    "  --arch: llama (default), qwen2, qwen3, qwen3moe, phi3, gemma2 or\n"
    "  gemma3, with\n"
    "  that family's tensors (QKV biases, q/k norms, fused QKV and gate/up,\n"
    "  post norms, tied output) and keys (soft-capping, sliding window of\n"
    "  W tokens, default ctx / 4). --rope-freqs (llama): Llama 3.1's RoPE\n"
    "  frequency factors in rope_freqs.weight. --n-expert (llama: Mixtral-\n"
    "  style; qwen3moe: required): N experts of width F per layer, each\n"
    "  token routed to U of them.\n"
    "  --type: a ggml type for every matrix (f32 f16 bf16 q4_0 q4_1 q5_0\n"
    "  q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs; n_embd and n_ff\n"
    "  multiples of its block, 256 for the k types and iq4_xs), or a\n"
    "  llama-quantize mix (q3_k_s/m/l, q4_k_s/m, q5_k_s/m): its per-tensor\n"
    "  types, as `kvault quantize` would write them from the f32 model.\n"
    "  random weights (normal, std 0.02; norm weights 1), deterministic for\n"
    "  a seed. --vocab copies the tokenizer.* keys of a GGUF, or 'bytes'\n"
    "  (default) generates a 259-token byte-fallback vocab.\n"
    "  Defaults: 64 / 2 layers / 4 heads / K = H / ffn 128 / ctx 2048 / f32\n"
    "  / seed 1. TinyLlama-shaped: --n-embd 2048 --n-layer 16 --n-head 32\n"
    "  --n-head-kv 8 --n-ff 5632\n";

StatusOr<GenModelOptions> ParseOptions(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown(
      {"arch", "n-embd", "n-layer", "n-head", "n-head-kv", "n-ff", "ctx",
       "type", "vocab", "seed", "name", "output", "rope-freqs",
       "sliding-window", "n-expert", "n-expert-used"}));
  if (!f.Has("output"))
    return InvalidArgumentError("gen-model: -o is required");
  GenModelOptions o;
  o.arch = f.GetString("arch", o.arch);
  o.rope_freqs = f.Has("rope-freqs");
  KV_ASSIGN_OR_RETURN(uint64_t window,
                      f.GetUint("sliding-window", 0, 0, 1u << 24));
  o.sliding_window = static_cast<uint32_t>(window);
  KV_ASSIGN_OR_RETURN(uint64_t n_expert, f.GetUint("n-expert", 0, 0, 256));
  KV_ASSIGN_OR_RETURN(uint64_t n_expert_used,
                      f.GetUint("n-expert-used", n_expert > 0 ? 2 : 0, 0, 256));
  o.n_expert = static_cast<uint32_t>(n_expert);
  o.n_expert_used = static_cast<uint32_t>(n_expert_used);
  KV_ASSIGN_OR_RETURN(uint64_t n_embd, f.GetUint("n-embd", 64, 1, 1u << 16));
  KV_ASSIGN_OR_RETURN(uint64_t n_layer, f.GetUint("n-layer", 2, 1, 512));
  KV_ASSIGN_OR_RETURN(uint64_t n_head, f.GetUint("n-head", 4, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t n_head_kv, f.GetUint("n-head-kv", 0, 0, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t n_ff, f.GetUint("n-ff", 128, 1, 1u << 20));
  KV_ASSIGN_OR_RETURN(uint64_t ctx, f.GetUint("ctx", 2048, 1, 1u << 24));
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  const std::string type = f.GetString("type", "f32");
  if (StatusOr<GgmlType> t = ParseGgmlType(type); t.ok()) {
    o.type = *t;
  } else {
    KV_ASSIGN_OR_RETURN(o.mix, ParseQuantFileType(type));
  }
  o.n_embd = static_cast<uint32_t>(n_embd);
  o.n_layer = static_cast<uint32_t>(n_layer);
  o.n_head = static_cast<uint32_t>(n_head);
  o.n_head_kv = static_cast<uint32_t>(n_head_kv);
  o.n_ff = static_cast<uint32_t>(n_ff);
  o.n_ctx = static_cast<uint32_t>(ctx);
  o.vocab = f.GetString("vocab", kGenModelByteVocab);
  o.name = f.GetString("name", o.name);
  return o;
}

}  // namespace

int RunGenModel(const std::vector<std::string>& raw_args) {
  std::vector<std::string> args;
  for (const std::string& a : raw_args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kGenModelUsage, stdout);
      return 0;
    }
    args.push_back(a == "-o" ? "--output" : a);
  }
  StatusOr<Flags> flags = Flags::Parse(args, {"rope-freqs"});
  StatusOr<GenModelOptions> options =
      flags.ok() ? ParseOptions(*flags)
                 : StatusOr<GenModelOptions>(flags.status());
  if (options.ok() && !flags->positional().empty()) {
    options = InvalidArgumentError("gen-model: unexpected argument '" +
                                   flags->positional()[0] + "'");
  }
  if (!options.ok()) {
    std::fprintf(stderr, "kvault gen-model: %s\n%s",
                 options.status().ToString().c_str(), kGenModelUsage);
    return 2;
  }
  const std::string path = flags->GetString("output", "");
  StatusOr<GenModelResult> r =
      GenerateLlamaModelFile(Env::Default(), *options, path);
  if (!r.ok()) {
    std::fprintf(stderr, "kvault gen-model: %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "kvault gen-model: reading back: %s\n",
                 file.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "wrote %s: %llu parameters, %llu tensors, vocab %u, %llu bytes, "
      "fingerprint %s\n",
      path.c_str(), static_cast<unsigned long long>(r->num_parameters),
      static_cast<unsigned long long>(r->num_tensors), r->n_vocab,
      static_cast<unsigned long long>(r->file_bytes),
      ComputeModelFingerprint(**file).ToHex().c_str());
  return 0;
}

}  // namespace kvault::apps
