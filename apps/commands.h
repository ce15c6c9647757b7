// Subcommands of the kvault binary. Each takes the arguments after its name
// and returns a process exit code.
#ifndef KVAULT_APPS_COMMANDS_H_
#define KVAULT_APPS_COMMANDS_H_

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/flags.h"
#include "core/mapped_file.h"
#include "core/status_or.h"
#include "model/compute_backend.h"

namespace kvault::apps {

// `kvault bench <scenario> [flags]`.
int RunBench(const std::vector<std::string>& args);
// `kvault tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] TEXT`.
int RunTokenize(const std::vector<std::string>& args);
// `kvault detokenize -m FILE.gguf [--special] ID...`.
int RunDetokenize(const std::vector<std::string>& args);

// `kvault gen-model [flags] -o out.gguf`: a random-weight Llama GGUF.
int RunGenModel(const std::vector<std::string>& args);
// `kvault quantize IN.gguf OUT.gguf TYPE [--pure] ...`: llama-quantize's
// mixes, bit-exact.
int RunQuantize(const std::vector<std::string>& args);
// `kvault inspect FILE [--metadata]`: a GGUF model's or state file's summary.
int RunInspect(const std::vector<std::string>& args);
// `kvault run -m MODEL -p PROMPT [-n N] [sampling flags]`: generate text.
int RunRun(const std::vector<std::string>& args);
// `kvault bench neighbour-stall [flags]`: ITL of slots during a restore.
int RunBenchNeighbourStall(const std::vector<std::string>& args);
// `kvault serve [flags]`: the HTTP server (llama-server's API).
int RunServe(const std::vector<std::string>& args);
// `kvault bench model -m MODEL [-p 512] [-n 128] [-t 2] [-r 3] [--json]`.
int RunBenchModel(const std::vector<std::string>& args);
// `kvault bench grammar -m MODEL -g GBNF [flags]`: sampled tg +- a grammar.
int RunBenchGrammar(const std::vector<std::string>& args);
// `kvault bench defrag-cost [flags]`: time and bytes of a full Defrag().
int RunBenchDefragCost(const std::vector<std::string>& args);
// `kvault bench restore-vs-recompute [flags]`: TTFT of restore vs prefill.
int RunBenchRestoreVsRecompute(const std::vector<std::string>& args);
// `kvault bench prefix-tiers [flags]`: TTFT by where the KV comes from.
int RunBenchPrefixTiers(const std::vector<std::string>& args);
// `kvault bench decode-fragmentation -m MODEL [flags]`: tg tok/s, paged.
int RunBenchDecodeFragmentation(const std::vector<std::string>& args);
// `kvault bench churn [flags]`: slot save/restore churn per KV policy.
int RunBenchChurn(const std::vector<std::string>& args);

// Returns `args` with each short flag in `aliases` (e.g. "-m") replaced by
// "--" + its long name; the argument after it is kept as its value.
std::vector<std::string> ExpandShortFlags(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& aliases);

// Reads --mmap / --no-mmap (the default: read the model into memory, see
// LoadMode); InvalidArgument when both are given.
StatusOr<LoadMode> ParseLoadMode(const Flags& f);

// Usage lines for --mmap / --no-mmap, shared by the commands that load a
// model.
inline constexpr const char kLoadModeUsage[] =
    "  --mmap           map the model file instead of reading it into memory\n"
    "                   (starts faster and shares the page cache; decode is\n"
    "                   slower without huge pages). --no-mmap: the default\n";

// A bench scenario's command line: its options and whether --json was given.
template <typename Options>
struct ScenarioArgs {
  Options options;
  bool json = false;
};

// Parses `kvault bench NAME` arguments (-m, -t, -r short for --model,
// --threads, --reps; --json a switch) with `parse`. Prints `usage` to
// stdout for --help and sets *exit_code 0; on an error prints it with
// `usage` to stderr and sets *exit_code 2; nullopt in both cases.
template <typename Options>
std::optional<ScenarioArgs<Options>> ParseScenarioArgs(
    const std::vector<std::string>& args, const char* name, const char* usage,
    StatusOr<Options> (*parse)(const Flags&), int* exit_code) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(usage, stdout);
    *exit_code = 0;
    return std::nullopt;
  }
  auto flags = Flags::Parse(
      ExpandShortFlags(args,
                       {{"-m", "model"}, {"-t", "threads"}, {"-r", "reps"}}),
      {"json"});
  StatusOr<Options> options =
      flags.ok() ? parse(*flags) : StatusOr<Options>(flags.status());
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench %s: %s\n%s", name,
                 options.status().ToString().c_str(), usage);
    *exit_code = 2;
    return std::nullopt;
  }
  return ScenarioArgs<Options>{std::move(options).value(), flags->Has("json")};
}

// Sets the flags the time-to-first-token scenarios share (--model, --dir,
// --threads, --reps, --chunk, --page-size, and the compute backend from
// the environment) on `o`, whose fields have those names.
template <typename Options>
Status ParseTtftFlags(const Flags& f, Options* o) {
  o->model_path = f.GetString("model", "");
  o->dir = f.GetString("dir", "");
  KV_ASSIGN_OR_RETURN(uint64_t t, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t r, f.GetUint("reps", 3, 1, 1000));
  KV_ASSIGN_OR_RETURN(uint64_t chunk, f.GetUint("chunk", 512, 1, 1u << 16));
  KV_ASSIGN_OR_RETURN(uint64_t page, f.GetUint("page-size", 16, 1, 256));
  o->threads = static_cast<uint32_t>(t);
  o->compute = ComputeBackendOptions::FromEnvironment();
  o->reps = static_cast<uint32_t>(r);
  o->chunk = static_cast<uint32_t>(chunk);
  o->page_size = static_cast<uint32_t>(page);
  return Status::Ok();
}

}  // namespace kvault::apps

#endif  // KVAULT_APPS_COMMANDS_H_
