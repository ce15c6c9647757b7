// `kvault bench model`: prompt-processing and generation throughput of a
// GGUF model with llama-bench's definitions (bench/scenarios/model_bench.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/model_bench.h"
#include "core/flags.h"
#include "kv/kv_dtype.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kBenchModelUsage[] =
    "usage: kvault bench model -m MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3]\n"
    "         [-d DEPTH] [--fragmented] [--cache-type f16|f32|q8_0]\n"
    "         [--page-size 16] [--seed 1] [--mmap] [--json]\n"
    "  pp: one forward call over P random prompt tokens (fresh sequence);\n"
    "  tg: N single-token decode steps (fresh sequence); tokens/s as the\n"
    "  mean +- sample stddev of R runs after one warm-up (llama-bench's\n"
    "  definitions). -p 0 or -n 0 skips that test. -t: compute threads.\n"
    "  -d DEPTH      both tests run after DEPTH cached tokens (as -d in\n"
    "                llama-bench)\n"
    "  --fragmented  every other KV page is held by other sequences, so no\n"
    "                two pages of the sequence are adjacent (compare with a\n"
    "                run without it: paging overhead)\n"
    "  --json  one object: model, model_bytes, decode_bytes (what one decode\n"
    "          step reads), num_parameters, n_prompt, n_gen, depth,\n"
    "          fragmented, mmap, reps, threads, kernels (the kernel set:\n"
    "          scalar, avx2, avx512, neon, neon-dotprod; KVAULT_KERNELS=SET\n"
    "          caps it), pp_tok_s, pp_std, tg_tok_s, tg_std\n";

// The usage text printed by --help and after a bad flag.
std::string BenchModelUsage() {
  return std::string(kBenchModelUsage) + kLoadModeUsage;
}

StatusOr<bench::ModelBenchOptions> ParseBenchModel(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"model", "n-prompt", "n-gen", "threads",
                                   "reps", "depth", "fragmented", "cache-type",
                                   "page-size", "seed", "json", "mmap",
                                   "no-mmap"}));
  if (!f.positional().empty()) {
    return InvalidArgumentError("unexpected argument '" + f.positional()[0] +
                                "'");
  }
  bench::ModelBenchOptions o;
  o.model_path = f.GetString("model", "");
  if (o.model_path.empty()) return InvalidArgumentError("-m MODEL is required");
  KV_ASSIGN_OR_RETURN(uint64_t p, f.GetUint("n-prompt", 512, 0, 1u << 20));
  KV_ASSIGN_OR_RETURN(uint64_t n, f.GetUint("n-gen", 128, 0, 1u << 20));
  KV_ASSIGN_OR_RETURN(uint64_t t, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t r, f.GetUint("reps", 3, 1, 1000));
  KV_ASSIGN_OR_RETURN(uint64_t page, f.GetUint("page-size", 16, 1, 256));
  KV_ASSIGN_OR_RETURN(uint64_t depth, f.GetUint("depth", 0, 0, 1u << 20));
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  KV_ASSIGN_OR_RETURN(o.cache_type,
                      ParseDtype(f.GetString("cache-type", "f16")));
  o.num_prompt = static_cast<uint32_t>(p);
  o.num_gen = static_cast<uint32_t>(n);
  o.threads = static_cast<uint32_t>(t);
  o.compute = ComputeBackendOptions::FromEnvironment();
  o.reps = static_cast<uint32_t>(r);
  o.page_size = static_cast<uint32_t>(page);
  o.depth = static_cast<uint32_t>(depth);
  o.fragmented = f.Has("fragmented");
  KV_ASSIGN_OR_RETURN(o.load_mode, ParseLoadMode(f));
  return o;
}

void PrintTable(const bench::ModelBenchResult& r) {
  std::printf("model: %s (%.2f MiB, %.2f M params), %s kernels, %u threads, "
              "%u reps, depth %u%s%s\n",
              r.model.c_str(), r.model_bytes / 1048576.0,
              r.num_parameters / 1e6, r.kernels.c_str(), r.threads, r.reps,
              r.depth,
              r.fragmented ? ", fragmented KV pages" : "",
              r.mmap ? ", mmap" : "");
  if (r.num_prompt > 0) {
    std::printf("  pp%-6u %10.2f ± %.2f tok/s\n", r.num_prompt, r.pp_tok_s,
                r.pp_std);
  }
  if (r.num_gen > 0) {
    std::printf("  tg%-6u %10.2f ± %.2f tok/s  (%.2f GB/s of weights read)\n",
                r.num_gen, r.tg_tok_s, r.tg_std,
                r.tg_tok_s * r.decode_bytes / 1e9);
  }
}

}  // namespace

int RunBenchModel(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(BenchModelUsage().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> expanded = ExpandShortFlags(
      args, {{"-m", "model"}, {"-p", "n-prompt"}, {"-n", "n-gen"},
             {"-t", "threads"}, {"-r", "reps"}, {"-d", "depth"}});
  auto flags =
      Flags::Parse(expanded, {"json", "fragmented", "mmap", "no-mmap"});
  StatusOr<bench::ModelBenchOptions> options =
      flags.ok() ? ParseBenchModel(*flags) : flags.status();
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench model: %s\n%s",
                 options.status().ToString().c_str(), BenchModelUsage().c_str());
    return 2;
  }
  auto result = bench::RunModelBench(*options);
  if (!result.ok()) {
    std::fprintf(stderr, "kvault bench model: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  if (flags->Has("json")) {
    std::printf("%s\n", bench::ModelBenchJson(*result).c_str());
  } else {
    PrintTable(*result);
  }
  return 0;
}

}  // namespace kvault::apps
