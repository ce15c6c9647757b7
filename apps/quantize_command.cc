// `kvault quantize IN.gguf OUT.gguf TYPE ...`: flags and progress output
// only; the conversion lives in model/model_quantizer.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/flags.h"
#include "model/model_quantizer.h"

namespace kvault::apps {
namespace {

constexpr const char kQuantizeUsage[] =
    "usage: kvault quantize IN.gguf OUT.gguf TYPE [--pure]\n"
    "         [--output-tensor-type T] [--token-embedding-type T]\n"
    "         [--threads N]\n"
    "  converts an f32/f16/bf16 GGUF model the way llama-quantize does\n"
    "  (no importance matrix): the same per-tensor types and bytes.\n"
    "  TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M\n"
    "        Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS\n"
    "        (case-insensitive; Q3_K, Q4_K, Q5_K mean the _M mixes)\n"
    "  --pure                    every quantized tensor gets TYPE's base type\n"
    "  --output-tensor-type T    ggml type of output.weight (e.g. q8_0)\n"
    "  --token-embedding-type T  ggml type of token_embd.weight\n"
    "  --threads N               threads (default: all)\n";

constexpr uint64_t kProgressMinBytes = uint64_t{64} << 20;

StatusOr<ModelQuantizeOptions> ParseOptions(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown(
      {"pure", "output-tensor-type", "token-embedding-type", "threads"}));
  if (f.positional().size() != 3) {
    return InvalidArgumentError("quantize: expected IN.gguf OUT.gguf TYPE");
  }
  ModelQuantizeOptions o;
  KV_ASSIGN_OR_RETURN(o.plan.ftype, ParseQuantFileType(f.positional()[2]));
  o.plan.pure = f.Has("pure");
  if (f.Has("output-tensor-type")) {
    KV_ASSIGN_OR_RETURN(o.plan.output_tensor_type,
                        ParseGgmlType(f.GetString("output-tensor-type", "")));
  }
  if (f.Has("token-embedding-type")) {
    KV_ASSIGN_OR_RETURN(o.plan.token_embedding_type,
                        ParseGgmlType(f.GetString("token-embedding-type", "")));
  }
  KV_ASSIGN_OR_RETURN(uint64_t threads, f.GetUint("threads", 0, 0, 1024));
  o.threads = static_cast<int>(threads);
  return o;
}

void PrintProgress(const QuantizeProgress& p) {
  std::fprintf(stderr, "[%4zu/%4zu] %-32s %6s -> %-6s %8.1f / %.1f MB\n",
               p.index, p.count, std::string(p.name).c_str(),
               std::string(GgmlTypeName(p.from)).c_str(),
               std::string(GgmlTypeName(p.to)).c_str(),
               static_cast<double>(p.input_bytes_done) / 1e6,
               static_cast<double>(p.input_bytes_total) / 1e6);
}

}  // namespace

int RunQuantize(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kQuantizeUsage, stdout);
      return 0;
    }
  }
  StatusOr<Flags> flags = Flags::Parse(args, {"pure"});
  StatusOr<ModelQuantizeOptions> options =
      flags.ok() ? ParseOptions(*flags)
                 : StatusOr<ModelQuantizeOptions>(flags.status());
  if (!options.ok()) {
    std::fprintf(stderr, "kvault quantize: %s\n%s",
                 options.status().ToString().c_str(), kQuantizeUsage);
    return 2;
  }
  const std::string& in = flags->positional()[0];
  const std::string& out = flags->positional()[1];
  options->progress = [](const QuantizeProgress& p) {
    if (p.input_bytes_total >= kProgressMinBytes) PrintProgress(p);
  };
  StatusOr<ModelQuantizeResult> r =
      QuantizeModelFile(Env::Default(), in, out, *options);
  if (!r.ok()) {
    std::fprintf(stderr, "kvault quantize: %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "wrote %s (%s): %llu tensors, %llu converted, %llu fallbacks, "
      "%.2f MB -> %.2f MB of tensors, %llu bytes\n",
      out.c_str(), std::string(QuantFileTypeName(options->plan.ftype)).c_str(),
      static_cast<unsigned long long>(r->num_tensors),
      static_cast<unsigned long long>(r->num_quantized),
      static_cast<unsigned long long>(r->num_fallbacks),
      static_cast<double>(r->input_tensor_bytes) / 1e6,
      static_cast<double>(r->output_tensor_bytes) / 1e6,
      static_cast<unsigned long long>(r->file_bytes));
  return 0;
}

}  // namespace kvault::apps
