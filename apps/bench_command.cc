// `kvault bench ...`: parses flags and hands them to the scenario library.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/alloc_churn.h"
#include "core/flags.h"

namespace kvault::apps {
namespace {

constexpr const char kBenchUsage[] =
    "usage: kvault bench alloc-churn [--policy P]... [--page-size N]...\n"
    "         [--cells N] [--slots S] [--sessions M] [--steps T] [--seed K]"
    " [--json]\n"
    "  --policy     paged | contiguous | contiguous+defrag | "
    "contiguous+shrink\n"
    "               (repeatable; default: all four)\n"
    "  --page-size  cells per page, power of two 1..256 (repeatable; "
    "default 1)\n"
    "  --json       one JSON object per run, one line each\n";

// Builds one options struct per (policy, page size) pair requested.
StatusOr<std::vector<bench::AllocChurnOptions>> ParseChurn(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"policy", "page-size", "cells", "slots",
                                   "sessions", "steps", "seed", "json"}));
  bench::AllocChurnOptions base;
  KV_ASSIGN_OR_RETURN(base.num_cells, f.GetUint("cells", 65536, 1, 1u << 30));
  KV_ASSIGN_OR_RETURN(uint64_t slots, f.GetUint("slots", 8, 1, 4096));
  KV_ASSIGN_OR_RETURN(uint64_t sessions, f.GetUint("sessions", 64, 2, 1u << 20));
  KV_ASSIGN_OR_RETURN(base.num_steps, f.GetUint("steps", 100000));
  KV_ASSIGN_OR_RETURN(base.seed, f.GetUint("seed", 1));
  base.num_slots = static_cast<uint32_t>(slots);
  base.num_sessions = static_cast<uint32_t>(sessions);
  std::vector<std::string> policies = f.GetAll("policy");
  if (policies.empty()) {
    policies = {"contiguous", "contiguous+shrink", "contiguous+defrag",
                "paged"};
  }
  KV_ASSIGN_OR_RETURN(std::vector<uint64_t> page_sizes,
                      f.GetAllUint("page-size", 1, 256));
  if (page_sizes.empty()) page_sizes = {1};
  std::vector<bench::AllocChurnOptions> runs;
  for (uint64_t size : page_sizes) {
    for (const std::string& policy : policies) {
      bench::AllocChurnOptions o = base;
      o.policy = policy;
      o.page_size = static_cast<uint32_t>(size);
      runs.push_back(o);
    }
  }
  return runs;
}

void PrintTableRow(const bench::AllocChurnResult& r, bool header) {
  if (header) {
    std::printf("%-18s %5s %8s %9s %8s %6s %6s %7s %10s %10s %10s\n", "policy",
                "page", "restores", "failures", "success", "slots", "util",
                "defrags", "moved", "alloc_p50", "alloc_p99");
  }
  std::printf("%-18s %5u %8llu %9llu %8.4f %6.3f %6.3f %7llu %10llu %8.0fns "
              "%8.0fns\n",
              r.policy.c_str(), r.page_size, (unsigned long long)r.restores,
              (unsigned long long)r.restore_failures, r.success_rate,
              r.slot_usage, r.mean_utilization,
              (unsigned long long)r.defrag_runs,
              (unsigned long long)r.cells_moved, r.alloc_ns_p50,
              r.alloc_ns_p99);
}

int RunAllocChurnCommand(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(args, {"json"});
  StatusOr<std::vector<bench::AllocChurnOptions>> runs =
      flags.ok() ? ParseChurn(*flags) : flags.status();
  if (!runs.ok()) {
    std::fprintf(stderr, "kvault bench alloc-churn: %s\n%s",
                 runs.status().ToString().c_str(), kBenchUsage);
    return 2;
  }
  bool json = flags->Has("json");
  for (size_t i = 0; i < runs->size(); ++i) {
    auto result = bench::RunAllocChurn((*runs)[i]);
    if (!result.ok()) {
      std::fprintf(stderr, "kvault bench alloc-churn: %s\n",
                   result.status().ToString().c_str());
      return 1;
    }
    if (json) {
      std::printf("%s\n", bench::AllocChurnJson(*result).c_str());
    } else {
      PrintTableRow(*result, i == 0);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kBenchUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "alloc-churn") return RunAllocChurnCommand(rest);
  std::fprintf(stderr, "kvault bench: unknown scenario '%s'\n%s",
               args[0].c_str(), kBenchUsage);
  return 2;
}

}  // namespace kvault::apps
