// `kvault bench churn`: the seed request's save/restore churn on the real
// engine, per allocation configuration (bench/scenarios/churn.h).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/churn.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kChurnUsage[] =
    "usage: kvault bench churn [-m MODEL.gguf] [--config C]... [--slots 4]\n"
    "         [--sessions 12] [--turns 48] [--cells 2048]"
    " [--ctx-per-slot 512]\n"
    "         [--page-size 16] [--gen 16] [-t 2] [--seed 1] [--dir DIR]"
    " [--json]\n"
    "  S slots serve M saved conversations for T turns: each turn erases a\n"
    "  slot, restores a conversation's slot file into it (first turn: a\n"
    "  fresh prompt), appends a 16..48-token user message, generates --gen\n"
    "  tokens greedily and saves the slot. A restore with no room falls back\n"
    "  to re-prefilling the history. Up to S turns run at once.\n"
    "  --config  contiguous | contiguous+shrink | contiguous+defrag | paged |\n"
    "            paged+spill (pool of --cells / 2 with a RAM spill tier)\n"
    "            (repeatable; default: all five)\n"
    "  --prompt-min, --prompt-max  a new conversation's prompt length range\n"
    "            (default: ctx-per-slot / 2 .. ctx-per-slot - 48 - gen - 1)\n"
    "  --max-in-flight N  turns running at once (default: one per slot;\n"
    "            1: one turn at a time, deterministic)\n"
    "  --dir     where slot files go (default: a fresh directory under /tmp);\n"
    "            they are removed afterwards\n"
    "  --json    one object per configuration, one line each\n"
    "  Without -m: a generated Q8_0 model of the small benchmark shape.\n";

// Reads the unsigned flag `name` in [min, max] into `*out`.
Status GetU32(const Flags& f, const char* name, uint64_t fallback,
              uint64_t min, uint64_t max, uint32_t* out) {
  KV_ASSIGN_OR_RETURN(uint64_t value, f.GetUint(name, fallback, min, max));
  *out = static_cast<uint32_t>(value);
  return Status::Ok();
}

StatusOr<bench::ChurnOptions> ParseChurnFlags(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown(
      {"model", "config", "slots", "sessions", "turns", "cells",
       "ctx-per-slot", "page-size", "gen", "prompt-min", "prompt-max",
       "max-in-flight", "threads", "seed", "dir", "json"}));
  bench::ChurnOptions o;
  o.model_path = f.GetString("model", "");
  o.dir = f.GetString("dir", "");
  o.configs = f.GetAll("config");
  const std::vector<std::string>& names = bench::ChurnConfigNames();
  for (const std::string& config : o.configs) {
    if (std::find(names.begin(), names.end(), config) == names.end()) {
      return InvalidArgumentError("unknown --config " + config);
    }
  }
  constexpr uint64_t kBig = 1u << 24;
  KV_RETURN_IF_ERROR(GetU32(f, "slots", 4, 1, 256, &o.num_slots));
  KV_RETURN_IF_ERROR(GetU32(f, "sessions", 12, 2, kBig, &o.num_sessions));
  KV_RETURN_IF_ERROR(GetU32(f, "turns", 48, 1, kBig, &o.num_turns));
  KV_RETURN_IF_ERROR(GetU32(f, "cells", 2048, 2, kBig, &o.num_cells));
  KV_RETURN_IF_ERROR(GetU32(f, "ctx-per-slot", 512, 8, kBig, &o.ctx_per_slot));
  KV_RETURN_IF_ERROR(GetU32(f, "page-size", 16, 1, 256, &o.page_size));
  KV_RETURN_IF_ERROR(GetU32(f, "gen", 16, 1, 1u << 16, &o.num_gen));
  KV_RETURN_IF_ERROR(GetU32(f, "prompt-min", 0, 0, kBig, &o.min_prompt));
  KV_RETURN_IF_ERROR(GetU32(f, "prompt-max", 0, 0, kBig, &o.max_prompt));
  KV_RETURN_IF_ERROR(GetU32(f, "max-in-flight", 0, 0, 256, &o.max_in_flight));
  KV_RETURN_IF_ERROR(GetU32(f, "threads", 2, 1, 1024, &o.threads));
  o.compute = ComputeBackendOptions::FromEnvironment();
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  return o;
}

void PrintChurnRow(const bench::ChurnResult& r, bool header) {
  if (header) {
    std::printf("%-18s %5s %9s %8s %6s %5s %8s %8s %6s %9s %6s %8s %8s %6s\n",
                "config", "cells", "restores", "success", "slots", "util",
                "rst_p50", "rst_p99", "defrag", "defrag_ms", "recomp",
                "gen_tok/s", "ttft_p50", "evict");
  }
  std::printf("%-18s %5u %4llu/%-4llu %8.3f %6.3f %5.2f %6.1fms %6.1fms %6llu"
              " %9.1f %6llu %8.1f %6.0fms %6llu\n",
              r.config.c_str(), r.num_cells,
              (unsigned long long)r.restore_ok,
              (unsigned long long)r.restore_attempts, r.restore_success_rate,
              r.slot_usage, r.pool_utilization, r.restore_ms_p50,
              r.restore_ms_p99, (unsigned long long)r.num_defrags,
              r.defrag_ms_total, (unsigned long long)r.recompute_turns,
              r.gen_tok_s, r.ttft_ms_p50, (unsigned long long)r.evictions);
}

}  // namespace

int RunBenchChurn(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kChurnUsage, stdout);
    return 0;
  }
  auto flags = Flags::Parse(
      ExpandShortFlags(args, {{"-m", "model"}, {"-t", "threads"}}), {"json"});
  StatusOr<bench::ChurnOptions> options =
      flags.ok() ? ParseChurnFlags(*flags)
                 : StatusOr<bench::ChurnOptions>(flags.status());
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench churn: %s\n%s",
                 options.status().ToString().c_str(), kChurnUsage);
    return 2;
  }
  std::vector<std::string> configs = options->configs;
  if (configs.empty()) configs = bench::ChurnConfigNames();
  const bool json = flags->Has("json");
  for (size_t i = 0; i < configs.size(); ++i) {
    auto r = bench::RunChurnConfig(*options, configs[i]);
    if (!r.ok()) {
      std::fprintf(stderr, "kvault bench churn: %s\n",
                   r.status().ToString().c_str());
      return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    if (json) {
      std::printf("%s\n", bench::ChurnJson(*r).c_str());
    } else {
      PrintChurnRow(*r, i == 0);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace kvault::apps
