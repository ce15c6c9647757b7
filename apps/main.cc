// kvault: one binary, several subcommands (flags and wiring only).
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "apps/commands.h"

namespace {

constexpr const char kUsage[] =
    "usage: kvault <command> [flags]\n"
    "commands:\n"
    "  serve               the HTTP server: llama-server's command line and\n"
    "                      API (--help for flags; also run as llama-server)\n"
    "  bench alloc-churn   the seed request's slot save/restore churn, "
    "model-free\n"
    "  bench state-io      save/restore GB/s of one sequence's state file vs\n"
    "                      page-cache read and memcpy\n"
    "  tokenize            token ids of a text: -m FILE.gguf [--no-bos]\n"
    "                      [--special] [--pieces] TEXT\n"
    "  detokenize          text of token ids: -m FILE.gguf [--special] ID...\n"
    "  gen-model           write a random-weight model GGUF (--help for "
    "flags)\n"
    "  quantize            IN.gguf OUT.gguf TYPE: llama-quantize's mixes\n"
    "                      (Q4_K_M, Q8_0, ...; --help for flags)\n"
    "  inspect             summarise a GGUF model or state file: FILE\n"
    "  run                 generate text: -m MODEL.gguf -p PROMPT [-n N]\n"
    "                      (--help for the sampling flags)\n"
    "  bench model         pp/tg tokens/s of a model (llama-bench style)\n"
    "run 'kvault bench --help' for the flags of a benchmark; 'kvault\n"
    "--version' for the version.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Installed as llama-server too: the same binary, run as `kvault serve`.
  const std::string_view self = argv[0];
  const size_t slash = self.rfind('/');
  if (self.substr(slash == std::string_view::npos ? 0 : slash + 1) ==
      "llama-server") {
    return kvault::apps::RunServe(args);
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  // `kvault --version` says what `kvault serve --version` says.
  if (args[0] == "--version") return kvault::apps::RunServe(args);
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "bench") return kvault::apps::RunBench(args);
  if (command == "tokenize") return kvault::apps::RunTokenize(args);
  if (command == "detokenize") return kvault::apps::RunDetokenize(args);
  if (command == "gen-model") return kvault::apps::RunGenModel(args);
  if (command == "quantize") return kvault::apps::RunQuantize(args);
  if (command == "inspect") return kvault::apps::RunInspect(args);
  if (command == "serve") return kvault::apps::RunServe(args);
  if (command == "run") return kvault::apps::RunRun(args);
  std::fprintf(stderr, "kvault: unknown command '%s'\n%s", command.c_str(),
               kUsage);
  return 2;
}
