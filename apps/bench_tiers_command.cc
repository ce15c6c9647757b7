// `kvault bench prefix-tiers`: TTFT of continuing a conversation by where
// its KV comes from (bench/scenarios/prefix_tiers.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/prefix_tiers.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kTiersUsage[] =
    "usage: kvault bench prefix-tiers [-m MODEL.gguf] [--length 4096] [-t 2]\n"
    "         [-r 3] [--chunk 512] [--page-size 16] [--redis URL] [--dir DIR]"
    " [--json]\n"
    "  Time to first token of continuing a conversation of --length tokens:\n"
    "  recomputed, still in the pool, from the RAM tier, from the prefix\n"
    "  store's disk tier (a store reopened, as after a restart) and, with\n"
    "  --redis redis://HOST:PORT, from the shared tier (as another instance);\n"
    "  plus that tier's write and read throughput. Medians of R runs after\n"
    "  a warm-up. Without -m: a generated Q8_0 model of the small shape.\n"
    "  --json  one object per source, then one for the throughput\n";

StatusOr<bench::PrefixTiersOptions> ParseTiers(const Flags& f) {
  KV_RETURN_IF_ERROR(
      f.CheckKnown({"model", "length", "threads", "reps", "chunk", "page-size",
                    "redis", "dir", "json"}));
  bench::PrefixTiersOptions o;
  KV_RETURN_IF_ERROR(ParseTtftFlags(f, &o));
  o.redis_url = f.GetString("redis", "");
  KV_ASSIGN_OR_RETURN(uint64_t length, f.GetUint("length", 4096, 1, 1u << 20));
  o.length = static_cast<uint32_t>(length);
  return o;
}

}  // namespace

int RunBenchPrefixTiers(const std::vector<std::string>& args) {
  int exit_code = 0;
  auto parsed = ParseScenarioArgs<bench::PrefixTiersOptions>(
      args, "prefix-tiers", kTiersUsage, ParseTiers, &exit_code);
  if (!parsed) return exit_code;
  auto r = bench::RunPrefixTiers(parsed->options);
  if (!r.ok()) {
    std::fprintf(stderr, "kvault bench prefix-tiers: %s\n",
                 r.status().ToString().c_str());
    return 1;
  }
  if (parsed->json) {
    std::fputs(bench::PrefixTiersJson(*r).c_str(), stdout);
    return 0;
  }
  std::printf(
      "model: %s, %u tokens, %u threads, median of %u\n%10s %12s "
      "%9s %8s\n",
      r->model.c_str(), r->num_tokens, r->threads, r->reps, "source", "ttft_ms",
      "speedup", "cached");
  for (const auto& row : r->rows) {
    std::printf("%10s %12.2f %8.1fx %8llu\n", row.source.c_str(), row.ttft_ms,
                row.speedup,
                static_cast<unsigned long long>(row.cached_tokens));
  }
  if (parsed->options.redis_url.empty()) return 0;
  std::printf(
      "page record %llu bytes x %llu; redis write %.3f GB/s, read "
      "%.3f GB/s\n",
      static_cast<unsigned long long>(r->record_bytes),
      static_cast<unsigned long long>(r->num_records), r->redis_write_gbps,
      r->redis_read_gbps);
  return 0;
}

}  // namespace kvault::apps
