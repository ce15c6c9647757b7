// `kvault bench grammar`: sampled generation with and without a GBNF
// grammar, alternating in one process (bench/scenarios/grammar_bench.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "bench/scenarios/grammar_bench.h"
#include "core/flags.h"
#include "model/compute_backend.h"

namespace kvault::apps {
namespace {

constexpr const char kBenchGrammarUsage[] =
    "usage: kvault bench grammar -m MODEL.gguf -g GRAMMAR.gbnf [-n 128]\n"
    "         [-t 2] [-r 5] [--seed 1] [--mmap] [--json]\n"
    "  tg with sampling: N decode steps from BOS, each feeding back the token\n"
    "  llama-server's default sampler chain picks (seed S + run), without\n"
    "  and then with the grammar, R times alternating after one warm-up\n"
    "  pair; a completed sentence restarts the grammar, so every run decodes\n"
    "  N tokens. Prints both rates (mean +- sample stddev) and their ratio.\n"
    "  --json  one object: model, grammar, n_gen, threads, reps, plain_tok_s,\n"
    "          plain_std, grammar_tok_s, grammar_std, sentences, sample\n";

std::string BenchGrammarUsage() {
  return std::string(kBenchGrammarUsage) + kLoadModeUsage;
}

StatusOr<bench::GrammarBenchOptions> ParseBenchGrammar(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown({"model", "grammar-file", "n-gen",
                                   "threads", "reps", "seed", "json", "mmap",
                                   "no-mmap"}));
  if (!f.positional().empty()) {
    return InvalidArgumentError("unexpected argument '" + f.positional()[0] +
                                "'");
  }
  bench::GrammarBenchOptions o;
  o.model_path = f.GetString("model", "");
  o.grammar_path = f.GetString("grammar-file", "");
  if (o.model_path.empty()) return InvalidArgumentError("-m MODEL is required");
  if (o.grammar_path.empty()) {
    return InvalidArgumentError("-g GRAMMAR.gbnf is required");
  }
  KV_ASSIGN_OR_RETURN(uint64_t n, f.GetUint("n-gen", 128, 1, 1u << 16));
  KV_ASSIGN_OR_RETURN(uint64_t t, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t r, f.GetUint("reps", 5, 1, 1000));
  KV_ASSIGN_OR_RETURN(o.seed, f.GetUint("seed", 1));
  o.num_gen = static_cast<uint32_t>(n);
  o.threads = static_cast<uint32_t>(t);
  o.compute = ComputeBackendOptions::FromEnvironment();
  o.reps = static_cast<uint32_t>(r);
  KV_ASSIGN_OR_RETURN(o.load_mode, ParseLoadMode(f));
  return o;
}

void PrintTable(const bench::GrammarBenchResult& r) {
  std::printf("model: %s, grammar: %s, %u threads, %u run pairs\n",
              r.model.c_str(), r.grammar.c_str(), r.threads, r.reps);
  std::printf("  tg%-4u plain   %8.2f ± %.2f tok/s\n", r.num_gen,
              r.plain_tok_s, r.plain_std);
  std::printf("  tg%-4u grammar %8.2f ± %.2f tok/s  (%.3fx plain; %u "
              "sentences completed)\n",
              r.num_gen, r.grammar_tok_s, r.grammar_std,
              r.grammar_tok_s / r.plain_tok_s, r.num_sentences);
  std::printf("  first constrained run: %.120s\n", r.sample.c_str());
}

}  // namespace

int RunBenchGrammar(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(BenchGrammarUsage().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> expanded = ExpandShortFlags(
      args, {{"-m", "model"}, {"-g", "grammar-file"}, {"-n", "n-gen"},
             {"-t", "threads"}, {"-r", "reps"}});
  auto flags = Flags::Parse(expanded, {"json", "mmap", "no-mmap"});
  StatusOr<bench::GrammarBenchOptions> options =
      flags.ok() ? ParseBenchGrammar(*flags) : flags.status();
  if (!options.ok()) {
    std::fprintf(stderr, "kvault bench grammar: %s\n%s",
                 options.status().ToString().c_str(),
                 BenchGrammarUsage().c_str());
    return 2;
  }
  auto result = bench::RunGrammarBench(*options);
  if (!result.ok()) {
    std::fprintf(stderr, "kvault bench grammar: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  if (flags->Has("json")) {
    std::printf("%s\n", bench::GrammarBenchJson(*result).c_str());
  } else {
    PrintTable(*result);
  }
  return 0;
}

}  // namespace kvault::apps
