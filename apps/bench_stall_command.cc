// `kvault bench neighbour-stall`: the other slots' inter-token latency while
// one slot restores a large state file (bench/scenarios/neighbour_stall.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/neighbour_stall.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kStallUsage[] =
    "usage: kvault bench neighbour-stall [-m MODEL.gguf] [--slots S]\n"
    "         [--restore-mb MB] [-n N] [--restore-after K] [-t T] [--dir DIR]\n"
    "         [--prefill TOKENS] [--share X] [--json] [--arrivals]\n"
    "  S slots (default 4) generate N tokens each (default 256) while one\n"
    "  more slot restores a state file of MB MiB (default 100), started\n"
    "  after K tokens per slot (default 32). Prints the neighbours'\n"
    "  inter-token latency before and during the restore. Without -m: a\n"
    "  generated Q8_0 model of the small benchmark shape.\n"
    "  --prefill TOKENS  instead of a restore, the further slot prefills a\n"
    "                prompt of TOKENS tokens; the generating slots run until\n"
    "                it is done (give -n enough tokens to outlast it)\n"
    "  --share X     the engine's prefill_step_share (0: fixed chunks)\n"
    "  --arrivals  with --json: every token's arrival time (for plots)\n";

StatusOr<bench::NeighbourStallOptions> ParseStall(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"model", "slots", "restore-mb", "n-gen",
                                   "restore-after", "threads", "dir", "json",
                                   "arrivals", "prefill", "share"}));
  bench::NeighbourStallOptions o;
  o.model_path = f.GetString("model", "");
  o.dir = f.GetString("dir", "");
  KV_ASSIGN_OR_RETURN(uint64_t slots, f.GetUint("slots", 4, 1, 64));
  KV_ASSIGN_OR_RETURN(uint64_t n, f.GetUint("n-gen", 256, 8, 1u << 16));
  KV_ASSIGN_OR_RETURN(uint64_t after, f.GetUint("restore-after", 32, 1, n));
  KV_ASSIGN_OR_RETURN(uint64_t t, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(o.restore_mb, f.GetDouble("restore-mb", 100));
  if (!(o.restore_mb > 0 && o.restore_mb <= 65536)) {
    return InvalidArgumentError("--restore-mb: expected (0, 65536]");
  }
  KV_ASSIGN_OR_RETURN(uint64_t prefill, f.GetUint("prefill", 0, 0, 1u << 20));
  KV_ASSIGN_OR_RETURN(o.prefill_step_share, f.GetDouble("share", -1));
  o.prefill_tokens = static_cast<uint32_t>(prefill);
  o.num_generating = static_cast<uint32_t>(slots);
  o.num_gen = static_cast<uint32_t>(n);
  o.restore_after = static_cast<uint32_t>(after);
  o.threads = static_cast<uint32_t>(t);
  o.compute = ComputeBackendOptions::FromEnvironment();
  return o;
}

// The prefill run's summary: ITL before (shallow), during and after
// (deep) the prompt; during / before, and during / the idle ITL
// interpolated to each gap's time (NeighbourStallResult).
void PrintPrefill(const bench::NeighbourStallResult& r) {
  std::printf("prefill: %llu tokens in %.1f ms\n"
              "neighbour ITL (ms), p50 / p99 / max: before %.2f / %.2f / "
              "%.2f | during prefill %.2f / %.2f / %.2f | after %.2f / "
              "%.2f / %.2f\n",
              (unsigned long long)r.restore_tokens, r.restore_ms,
              r.itl_median_before_ms, r.itl_p99_before_ms,
              r.itl_max_before_ms, r.itl_median_during_ms,
              r.itl_p99_during_ms, r.itl_max_during_ms,
              r.itl_median_after_ms, r.itl_p99_after_ms, r.itl_max_after_ms);
  std::printf("ratio during/before: p50 %.2fx p99 %.2fx max %.2fx | "
              "during/idle at the same depth: p50 %.2fx p99 %.2fx max "
              "%.2fx\n",
              r.itl_median_during_ms / r.itl_median_before_ms,
              r.itl_p99_during_ms / r.itl_p99_before_ms,
              r.itl_max_during_ms / r.itl_max_before_ms,
              r.ratio_same_depth_p50, r.ratio_same_depth_p99,
              r.ratio_same_depth_max);
}

}  // namespace

int RunBenchNeighbourStall(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kStallUsage, stdout);
    return 0;
  }
  auto flags = Flags::Parse(
      ExpandShortFlags(args, {{"-m", "model"}, {"-n", "n-gen"},
                              {"-t", "threads"}}),
      {"json", "arrivals"});
  StatusOr<bench::NeighbourStallOptions> options =
      flags.ok() ? ParseStall(*flags)
                 : StatusOr<bench::NeighbourStallOptions>(flags.status());
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench neighbour-stall: %s\n%s",
                 options.status().ToString().c_str(), kStallUsage);
    return 2;
  }
  auto r = bench::RunNeighbourStall(*options);
  if (!r.ok()) {
    std::fprintf(stderr, "kvault bench neighbour-stall: %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  if (flags->Has("json")) {
    std::printf("%s\n",
                bench::NeighbourStallJson(*r, flags->Has("arrivals")).c_str());
    return 0;
  }
  if (options->prefill_tokens > 0) {
    PrintPrefill(*r);
    return 0;
  }
  std::printf("restore: %llu tokens, %.1f MiB in %.1f ms\n"
              "neighbour inter-token latency (ms): before median %.2f max "
              "%.2f | during median %.2f max %.2f | p99 %.2f\n",
              (unsigned long long)r->restore_tokens,
              r->restore_bytes / 1048576.0, r->restore_ms,
              r->itl_median_before_ms, r->itl_max_before_ms,
              r->itl_median_during_ms, r->itl_max_during_ms, r->itl_p99_ms);
  return 0;
}

}  // namespace kvault::apps
