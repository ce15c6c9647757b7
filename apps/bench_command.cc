// `kvault bench ...`: parses flags and hands them to the scenario library.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/alloc_churn.h"
#include "bench/scenarios/state_io.h"
#include "core/flags.h"
#include "kv/kv_dtype.h"
#include "kv/state_format.h"

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
    "  --json       one JSON object per run, one line each\n"
    "\n"
    "usage: kvault bench state-io [--tokens T] [--layers L] [--kv-heads H]\n"
    "         [--head-dim D] [--dtype f32|f16|q8_0] [--page-size N]"
    " [--fragmented]\n"
    "         [--threads N] [--reps R] [--dir DIR] [--seed K] [--json]\n"
    "  save and restore GB/s of one sequence's state file (save with and\n"
    "  without fsync; restore into a contiguous and a fragmented pool) next\n"
    "  to pread-from-page-cache and memcpy GB/s of the same bytes; medians\n"
    "  of R runs. Defaults: 4096 tokens, 22 layers x 4 heads x 64 f16,\n"
    "  page 16, 5 reps, a fresh directory under /tmp (removed afterwards).\n"
    "  --fragmented only the fragmented restore (restore_gbps is null)\n"
    "  --threads    threads each restore reads its chunks with (default 2)\n"
    "  --json       one object: bytes, restore_threads, save_gbps,\n"
    "               save_fsync_gbps,\n"
    "               restore_gbps, restore_fragmented_gbps, read_gbps,\n"
    "               memcpy_gbps\n"
    "\n"
    "usage: kvault bench model -m MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3]"
    " [--json]\n"
    "  (kvault bench model --help for details)\n"
    "\n"
    "usage: kvault bench grammar -m MODEL.gguf -g GRAMMAR.gbnf [-n 128]"
    " [-t 2] [-r 5] [--json]\n"
    "  (kvault bench grammar --help for details)\n"
    "\n"
    "usage: kvault bench neighbour-stall [-m MODEL.gguf] [--slots S]"
    " [--restore-mb MB] [--json]\n"
    "  (kvault bench neighbour-stall --help for details)\n"
    "\n"
    "usage: kvault bench defrag-cost [--pool-mib MB]... [--frag F]... "
    "[--json]\n"
    "usage: kvault bench restore-vs-recompute [-m MODEL] [--length L]..."
    " [--json]\n"
    "usage: kvault bench prefix-tiers [-m MODEL] [--length L] [--redis URL]"
    " [--json]\n"
    "usage: kvault bench decode-fragmentation -m MODEL [--depth D]..."
    " [--page-size P]... [--json]\n"
    "usage: kvault bench churn [-m MODEL] [--config C]... [--turns T] "
    "[--json]\n"
    "  (each with --help for details)\n";

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

StatusOr<bench::StateIoOptions> ParseStateIo(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"tokens", "layers", "kv-heads", "head-dim",
                                   "dtype", "page-size", "fragmented",
                                   "threads", "reps", "dir", "seed", "json"}));
  bench::StateIoOptions o;
  KV_ASSIGN_OR_RETURN(o.num_tokens,
                      f.GetUint("tokens", 4096, 1, kStateMaxTokens));
  KV_ASSIGN_OR_RETURN(uint64_t layers, f.GetUint("layers", 22, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t heads, f.GetUint("kv-heads", 4, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t dim, f.GetUint("head-dim", 64, 1, 16384));
  KV_ASSIGN_OR_RETURN(uint64_t page_size, f.GetUint("page-size", 16, 1, 256));
  KV_ASSIGN_OR_RETURN(uint64_t reps, f.GetUint("reps", 5, 1, 1000));
  KV_ASSIGN_OR_RETURN(uint64_t threads, f.GetUint("threads", 2, 1, 64));
  KV_ASSIGN_OR_RETURN(o.layout.dtype, ParseDtype(f.GetString("dtype", "f16")));
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  o.layout.num_layers = static_cast<uint32_t>(layers);
  o.layout.num_kv_heads = static_cast<uint32_t>(heads);
  o.layout.head_dim_k = o.layout.head_dim_v = static_cast<uint32_t>(dim);
  o.page_size = static_cast<uint32_t>(page_size);
  o.reps = static_cast<uint32_t>(reps);
  o.restore_threads = static_cast<uint32_t>(threads);
  o.fragmented_only = f.Has("fragmented");
  o.dir = f.GetString("dir", "");
  return o;
}

void PrintStateIoRow(const char* what, double gbps, uint64_t bytes) {
  std::printf("  %-32s %8.2f GB/s %9.2f ms\n", what, gbps,
              gbps > 0 ? static_cast<double>(bytes) / gbps / 1e6 : 0.0);
}

void PrintStateIoTable(const bench::StateIoResult& r) {
  std::printf(
      "state-io: %llu tokens, %s, page %u: %llu-byte file, restores with "
      "%u thread%s, median of %u runs\n",
      (unsigned long long)r.num_tokens, r.layout.c_str(), r.page_size,
      (unsigned long long)r.bytes, r.restore_threads,
      r.restore_threads == 1 ? "" : "s", r.reps);
  PrintStateIoRow("save (no fsync)", r.save_gbps, r.bytes);
  PrintStateIoRow("save (fsync file + dir)", r.save_fsync_gbps, r.bytes);
  if (r.restore_gbps) {
    PrintStateIoRow("restore, contiguous pool", *r.restore_gbps, r.bytes);
  }
  PrintStateIoRow("restore, fragmented pool", r.restore_fragmented_gbps,
                  r.bytes);
  PrintStateIoRow("read from page cache (pread)", r.read_gbps, r.bytes);
  PrintStateIoRow("memcpy", r.memcpy_gbps, r.bytes);
  if (r.read_gbps <= 0) return;
  if (r.restore_gbps) {
    std::printf("  restore / read: %.2f contiguous, %.2f fragmented\n",
                *r.restore_gbps / r.read_gbps,
                r.restore_fragmented_gbps / r.read_gbps);
  } else {
    std::printf("  restore / read: %.2f fragmented\n",
                r.restore_fragmented_gbps / r.read_gbps);
  }
}

int RunStateIoCommand(const std::vector<std::string>& args) {
  auto flags = Flags::Parse(args, {"json", "fragmented"});
  StatusOr<bench::StateIoOptions> options =
      flags.ok() ? ParseStateIo(*flags) : flags.status();
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench state-io: %s\n%s",
                 options.status().ToString().c_str(), kBenchUsage);
    return 2;
  }
  auto result = bench::RunStateIo(*options);
  if (!result.ok()) {
    std::fprintf(stderr, "kvault bench state-io: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  if (flags->Has("json")) {
    std::printf("%s\n", bench::StateIoJson(*result).c_str());
  } else {
    PrintStateIoTable(*result);
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
  if (args[0] == "state-io") return RunStateIoCommand(rest);
  if (args[0] == "model") return RunBenchModel(rest);
  if (args[0] == "grammar") return RunBenchGrammar(rest);
  if (args[0] == "neighbour-stall") return RunBenchNeighbourStall(rest);
  if (args[0] == "defrag-cost") return RunBenchDefragCost(rest);
  if (args[0] == "restore-vs-recompute") {
    return RunBenchRestoreVsRecompute(rest);
  }
  if (args[0] == "prefix-tiers") return RunBenchPrefixTiers(rest);
  if (args[0] == "churn") return RunBenchChurn(rest);
  if (args[0] == "decode-fragmentation") {
    return RunBenchDecodeFragmentation(rest);
  }
  std::fprintf(stderr, "kvault bench: unknown scenario '%s'\n%s",
               args[0].c_str(), kBenchUsage);
  return 2;
}

}  // namespace kvault::apps
