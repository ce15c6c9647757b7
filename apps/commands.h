// Subcommands of the kvault binary. Each takes the arguments after its name
// and returns a process exit code.
#ifndef KVAULT_APPS_COMMANDS_H_
#define KVAULT_APPS_COMMANDS_H_

#include <map>
#include <string>
#include <vector>

#include "core/flags.h"
#include "core/mapped_file.h"
#include "core/status_or.h"

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

}  // namespace kvault::apps

#endif  // KVAULT_APPS_COMMANDS_H_
