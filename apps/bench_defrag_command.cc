// `kvault bench defrag-cost`: time and bytes of KvCache::Defrag() on pools of
// several sizes and fragmentations (bench/scenarios/defrag_cost.h).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/defrag_cost.h"
#include "core/flags.h"

namespace kvault::apps {
namespace {

constexpr const char kDefragUsage[] =
    "usage: kvault bench defrag-cost [--pool-mib MB]... [--frag F]...\n"
    "         [--free F] [--page-size 16] [--seq-pages 4] [--no-verify]"
    " [--json]\n"
    "  A KV pool of MB MiB (TinyLlama layout: 22 layers x 4 heads x 64, f16)\n"
    "  is filled with sequences of seq-pages full pages; a fraction --free\n"
    "  (default 0.25) of them is removed so that the pool's fragmentation\n"
    "  (1 - largest free run / free cells) is close to F; then one full\n"
    "  Defrag() runs. Reports its time and bytes moved next to memcpy of\n"
    "  the same bytes. Repeatable --pool-mib (default 64 256 1024 4096) and\n"
    "  --frag (default 0.1 0.3 0.5 0.7 0.9); one run per pair.\n"
    "  --json  one object per run, one line each\n";

StatusOr<std::vector<bench::DefragCostOptions>> ParseDefrag(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"pool-mib", "frag", "free", "page-size",
                                   "seq-pages", "no-verify", "json"}));
  bench::DefragCostOptions base;
  KV_ASSIGN_OR_RETURN(base.spec.free_fraction, f.GetDouble("free", 0.25));
  KV_ASSIGN_OR_RETURN(uint64_t page, f.GetUint("page-size", 16, 1, 256));
  KV_ASSIGN_OR_RETURN(uint64_t seq_pages, f.GetUint("seq-pages", 4, 1, 4096));
  base.spec.page_size = static_cast<uint32_t>(page);
  base.spec.seq_pages = static_cast<uint32_t>(seq_pages);
  base.verify = !f.Has("no-verify");
  KV_ASSIGN_OR_RETURN(std::vector<uint64_t> pools,
                      f.GetAllUint("pool-mib", 1, 1u << 20));
  if (pools.empty()) pools = {64, 256, 1024, 4096};
  std::vector<double> fracs;
  for (const std::string& s : f.GetAll("frag")) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(v >= 0 && v < 1)) {
      return InvalidArgumentError("--frag: expected a number in [0, 1), got '" +
                                  s + "'");
    }
    fracs.push_back(v);
  }
  if (fracs.empty()) fracs = {0.1, 0.3, 0.5, 0.7, 0.9};
  std::vector<bench::DefragCostOptions> runs;
  for (uint64_t mib : pools) {
    for (double frag : fracs) {
      bench::DefragCostOptions o = base;
      o.spec.pool_bytes = mib << 20;
      o.spec.target_fragmentation = frag;
      runs.push_back(o);
    }
  }
  return runs;
}

void PrintRow(const bench::DefragCostResult& r, bool header) {
  if (header) {
    std::printf("%9s %6s %6s %9s %10s %9s %9s %10s %9s\n", "pool_MiB", "frag",
                "target", "moves", "moved_MiB", "defrag_ms", "GB/s",
                "memcpy_ms", "GB/s");
  }
  std::printf("%9.0f %6.3f %6.2f %9llu %10.1f %9.2f %9.2f %10.2f %9.2f\n",
              r.pool_bytes / 1048576.0, r.fragmentation,
              r.target_fragmentation, (unsigned long long)r.num_moves,
              r.bytes_moved / 1048576.0, r.defrag_ms, r.defrag_gbps,
              r.memcpy_ms, r.memcpy_gbps);
}

}  // namespace

int RunBenchDefragCost(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kDefragUsage, stdout);
    return 0;
  }
  auto flags = Flags::Parse(args, {"json", "no-verify"});
  StatusOr<std::vector<bench::DefragCostOptions>> runs =
      flags.ok() ? ParseDefrag(*flags) : flags.status();
  if (!runs.ok()) {
    std::fprintf(stderr, "kvault bench defrag-cost: %s\n%s",
                 runs.status().ToString().c_str(), kDefragUsage);
    return 2;
  }
  for (size_t i = 0; i < runs->size(); ++i) {
    auto r = bench::RunDefragCost((*runs)[i]);
    if (!r.ok()) {
      std::fprintf(stderr, "kvault bench defrag-cost: %s\n",
                   r.status().ToString().c_str());
      return 1;
    }
    if (flags->Has("json")) {
      std::printf("%s\n", bench::DefragCostJson(*r).c_str());
    } else {
      PrintRow(*r, i == 0);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace kvault::apps
