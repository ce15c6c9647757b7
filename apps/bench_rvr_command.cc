// `kvault bench restore-vs-recompute`: TTFT of continuing a conversation by
// restoring its state file vs prefilling it again
// (bench/scenarios/restore_vs_recompute.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/restore_vs_recompute.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kRvrUsage[] =
    "usage: kvault bench restore-vs-recompute [-m MODEL.gguf] [--length L]...\n"
    "         [-t 2] [-r 3] [--chunk 512] [--page-size 16] [--dir DIR]"
    " [--json]\n"
    "  For each conversation length L (repeatable; default 128 256 512 1024\n"
    "  2048 4096): time to first token of restoring its state file into a\n"
    "  fresh cache + one decode step, vs prefilling L + 1 tokens in chunks\n"
    "  of --chunk. Medians of R runs after a warm-up. Without -m: a\n"
    "  generated Q8_0 model of the small benchmark shape.\n"
    "  --json  one object per length, one line each\n";

StatusOr<bench::RestoreVsRecomputeOptions> ParseRvr(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"model", "length", "threads", "reps",
                                   "chunk", "page-size", "dir", "json"}));
  bench::RestoreVsRecomputeOptions o;
  KV_RETURN_IF_ERROR(ParseTtftFlags(f, &o));
  KV_ASSIGN_OR_RETURN(std::vector<uint64_t> lengths,
                      f.GetAllUint("length", 1, 1u << 20));
  if (!lengths.empty()) o.lengths.assign(lengths.begin(), lengths.end());
  return o;
}

}  // namespace

int RunBenchRestoreVsRecompute(const std::vector<std::string>& args) {
  int exit_code = 0;
  auto parsed = ParseScenarioArgs<bench::RestoreVsRecomputeOptions>(
      args, "restore-vs-recompute", kRvrUsage, ParseRvr, &exit_code);
  if (!parsed) return exit_code;
  auto r = bench::RunRestoreVsRecompute(parsed->options);
  if (!r.ok()) {
    std::fprintf(stderr, "kvault bench restore-vs-recompute: %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  if (parsed->json) {
    std::fputs(bench::RestoreVsRecomputeJson(*r).c_str(), stdout);
    return 0;
  }
  std::printf("model: %s, %u threads, median of %u\n%8s %10s %12s %10s "
              "%14s %8s\n",
              r->model.c_str(), r->threads, r->reps, "tokens", "file_MiB",
              "restore_ms", "(io_ms)", "recompute_ms", "speedup");
  for (const auto& row : r->rows) {
    std::printf("%8u %10.2f %12.2f %10.2f %14.2f %7.1fx\n", row.num_tokens,
                row.file_bytes / 1048576.0, row.restore_ttft_ms,
                row.restore_io_ms, row.recompute_ttft_ms, row.speedup);
  }
  return 0;
}

}  // namespace kvault::apps
