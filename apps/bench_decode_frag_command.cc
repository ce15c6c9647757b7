// `kvault bench decode-fragmentation`: generation tok/s over a contiguous vs
// a maximally interleaved KV cache (bench/scenarios/decode_fragmentation.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/decode_fragmentation.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kDecodeFragUsage[] =
    "usage: kvault bench decode-fragmentation -m MODEL.gguf [--depth D]...\n"
    "         [--page-size P]... [-n 32] [-t 2] [-r 3] [--rounds 2] [--json]\n"
    "  Generation tok/s (N decode steps after D cached tokens) with the\n"
    "  sequence's KV pages contiguous vs every other page taken by another\n"
    "  sequence (the rest handed out lowest first). Repeatable --depth\n"
    "  (default 512 1024 2048 4096) and --page-size (default 1 16 256).\n"
    "  Each layout is measured --rounds times in A B B A order (tok/s\n"
    "  averaged), so drifting load from other processes hits both alike.\n"
    "  --json  one object per (page size, depth), one line each\n";

StatusOr<bench::DecodeFragmentationOptions> ParseDecodeFrag(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"model", "depth", "page-size", "n-gen",
                                   "threads", "reps", "rounds", "seed",
                                   "json"}));
  bench::DecodeFragmentationOptions o;
  o.model_path = f.GetString("model", "");
  if (o.model_path.empty()) return InvalidArgumentError("-m MODEL is required");
  KV_ASSIGN_OR_RETURN(std::vector<uint64_t> depths,
                      f.GetAllUint("depth", 0, 1u << 20));
  if (!depths.empty()) o.depths.assign(depths.begin(), depths.end());
  KV_ASSIGN_OR_RETURN(std::vector<uint64_t> pages,
                      f.GetAllUint("page-size", 1, 256));
  if (!pages.empty()) o.page_sizes.assign(pages.begin(), pages.end());
  KV_ASSIGN_OR_RETURN(uint64_t n, f.GetUint("n-gen", 32, 1, 1u << 16));
  KV_ASSIGN_OR_RETURN(uint64_t t, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t r, f.GetUint("reps", 3, 1, 1000));
  KV_ASSIGN_OR_RETURN(uint64_t rounds, f.GetUint("rounds", 2, 1, 100));
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  o.rounds = static_cast<uint32_t>(rounds);
  o.num_gen = static_cast<uint32_t>(n);
  o.threads = static_cast<uint32_t>(t);
  o.compute = ComputeBackendOptions::FromEnvironment();
  o.reps = static_cast<uint32_t>(r);
  return o;
}

}  // namespace

int RunBenchDecodeFragmentation(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kDecodeFragUsage, stdout);
    return 0;
  }
  auto flags = Flags::Parse(
      ExpandShortFlags(args, {{"-m", "model"}, {"-n", "n-gen"},
                              {"-t", "threads"}, {"-r", "reps"}}),
      {"json"});
  StatusOr<bench::DecodeFragmentationOptions> options =
      flags.ok() ? ParseDecodeFrag(*flags)
                 : StatusOr<bench::DecodeFragmentationOptions>(flags.status());
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench decode-fragmentation: %s\n%s",
                 options.status().ToString().c_str(), kDecodeFragUsage);
    return 2;
  }
  const bool json = flags->Has("json");
  if (!json) {
    std::printf("%5s %6s %14s %14s %9s\n", "page", "depth", "contig_tok/s",
                "frag_tok/s", "slowdown");
  }
  Status s = bench::RunDecodeFragmentation(
      *options, [&](const bench::DecodeFragmentationRow& row) {
        if (json) {
          std::printf("%s\n",
                      bench::DecodeFragmentationJson(*options, row).c_str());
        } else {
          std::printf("%5u %6u %14.2f %14.2f %8.1f%%\n", row.page_size,
                      row.depth, row.contiguous_tok_s, row.fragmented_tok_s,
                      row.slowdown_pct);
        }
        std::fflush(stdout);
      });
  if (!s.ok()) {
    std::fprintf(stderr, "kvault bench decode-fragmentation: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kvault::apps
