// `kvault run`: generates text from a prompt with a GGUF model, streaming
// the generated text (not the prompt) to stdout token by token; timings go
// to stderr.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/flags.h"
#include "kv/kv_cache.h"
#include "kv/kv_dtype.h"
#include "model/compute_backend.h"
#include "model/generator.h"
#include "model/inference.h"
#include "model/llama_model.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

namespace kvault::apps {
namespace {

constexpr const char kRunUsage[] =
    "usage: kvault run -m MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K]\n"
    "         [--top-p P] [--min-p M] [--seed S] [--repeat-penalty R]\n"
    "         [--repeat-last-n L] [-t THREADS] [--ids] [--ctx C]\n"
    "         [--cache-type f16|f32|q8_0] [--batch B] [--page-size N]\n"
    "         [--mmap | --no-mmap]\n"
    "  streams the text generated after PROMPT to stdout; a timings line\n"
    "  (prompt and generation tokens/s) goes to stderr.\n"
    "  -n N             tokens to generate (default 128); stops earlier at\n"
    "                   the end-of-generation token or a full context\n"
    "  --temp T         temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K        0 = off (default 40)\n"
    "  --top-p P        1 = off (default 0.95)\n"
    "  --min-p M        0 = off (default 0.05)\n"
    "  --seed S         sampling seed (default: random, printed to stderr)\n"
    "  --repeat-penalty R  1 = off (default 1.0), over the last L tokens\n"
    "                   (--repeat-last-n, default 64)\n"
    "  -t THREADS       compute threads (default 2)\n"
    "  --ids            print the generated token ids instead of text\n"
    "  --ctx C          context size in tokens (default: the model's)\n"
    "  --cache-type     KV element type (default f16)\n"
    "  --batch B        prompt tokens per forward call (default 512)\n"
    "  --page-size N    KV cache cells per page (default 16)\n";

// The usage text printed by --help and after a bad flag.
std::string RunUsage() { return std::string(kRunUsage) + kLoadModeUsage; }

struct RunOptions {
  std::string model;
  std::string prompt;
  uint32_t num_predict = 128;
  SamplingParams sampling;
  uint32_t threads = 2;
  bool ids = false;
  uint32_t n_ctx = 0;  // 0: the model's training context
  KvDtype cache_type = KvDtype::kF16;
  uint32_t batch = 512;
  uint32_t page_size = 16;
  LoadMode load_mode = LoadMode::kRead;
};

StatusOr<RunOptions> ParseRun(const Flags& f) {
  KV_RETURN_IF_ERROR(f.CheckKnown(
      {"model", "prompt", "n-predict", "temp", "top-k", "top-p", "min-p",
       "seed", "repeat-penalty", "repeat-last-n", "threads", "ids", "ctx",
       "cache-type", "batch", "page-size", "mmap", "no-mmap"}));
  if (!f.positional().empty()) {
    return InvalidArgumentError("unexpected argument '" + f.positional()[0] +
                                "' (quote the prompt: -p \"...\")");
  }
  RunOptions o;
  o.model = f.GetString("model", "");
  if (o.model.empty()) return InvalidArgumentError("-m MODEL is required");
  if (!f.Has("prompt")) return InvalidArgumentError("-p PROMPT is required");
  o.prompt = f.GetString("prompt", "");
  KV_ASSIGN_OR_RETURN(uint64_t n, f.GetUint("n-predict", 128, 0, 1u << 24));
  KV_ASSIGN_OR_RETURN(double temp, f.GetDouble("temp", 0.8));
  KV_ASSIGN_OR_RETURN(uint64_t top_k, f.GetUint("top-k", 40, 0, 1u << 30));
  KV_ASSIGN_OR_RETURN(double top_p, f.GetDouble("top-p", 0.95));
  KV_ASSIGN_OR_RETURN(double min_p, f.GetDouble("min-p", 0.05));
  KV_ASSIGN_OR_RETURN(o.sampling.seed, f.GetUint("seed", kRandomSeed));
  KV_ASSIGN_OR_RETURN(double penalty, f.GetDouble("repeat-penalty", 1.0));
  KV_ASSIGN_OR_RETURN(uint64_t last_n,
                      f.GetUint("repeat-last-n", 64, 0, 1u << 20));
  KV_ASSIGN_OR_RETURN(uint64_t threads, f.GetUint("threads", 2, 1, 1024));
  KV_ASSIGN_OR_RETURN(uint64_t ctx, f.GetUint("ctx", 0, 0, 1u << 24));
  KV_ASSIGN_OR_RETURN(o.cache_type,
                      ParseDtype(f.GetString("cache-type", "f16")));
  KV_ASSIGN_OR_RETURN(uint64_t batch, f.GetUint("batch", 512, 1, 1u << 20));
  KV_ASSIGN_OR_RETURN(uint64_t page, f.GetUint("page-size", 16, 1, 256));
  o.num_predict = static_cast<uint32_t>(n);
  o.sampling.temperature = static_cast<float>(temp);
  o.sampling.top_k = static_cast<int32_t>(top_k);
  o.sampling.top_p = static_cast<float>(top_p);
  o.sampling.min_p = static_cast<float>(min_p);
  o.sampling.repeat_penalty = static_cast<float>(penalty);
  o.sampling.repeat_last_n = static_cast<int32_t>(last_n);
  KV_RETURN_IF_ERROR(o.sampling.Validate());
  o.threads = static_cast<uint32_t>(threads);
  o.ids = f.Has("ids");
  KV_ASSIGN_OR_RETURN(o.load_mode, ParseLoadMode(f));
  o.n_ctx = static_cast<uint32_t>(ctx);
  o.batch = static_cast<uint32_t>(batch);
  o.page_size = static_cast<uint32_t>(page);
  return o;
}

// Builds a cache of at least n_ctx cells for `model`.
StatusOr<std::unique_ptr<KvCache>> MakeCache(const LlamaModel& model,
                                             const RunOptions& o,
                                             uint32_t n_ctx) {
  KvCacheOptions options;
  options.page_size = o.page_size;
  options.num_pages = (n_ctx + o.page_size - 1) / o.page_size;
  options.layout = model.KvLayoutFor(o.cache_type);
  return KvCache::Create(options);
}

// Prints `status` and returns the exit code of a failed run.
int Fail(const Status& status) {
  std::fprintf(stderr, "kvault run: %s\n", status.ToString().c_str());
  return 1;
}

// Generates and streams; returns the process exit code.
int Generate(const RunOptions& o) {
  // The calling thread computes too: T threads are T - 1 workers.
  ComputeBackendOptions compute = ComputeBackendOptions::FromEnvironment();
  compute.num_threads = o.threads;
  auto model = LlamaModel::Load(o.model, o.load_mode, compute.isa);
  if (!model.ok()) return Fail(model.status());
  const Tokenizer& tokenizer = (*model)->tokenizer();
  const std::vector<TokenId> prompt =
      tokenizer.Tokenize(o.prompt, /*add_special=*/true,
                         /*parse_special=*/true);
  const uint32_t n_ctx =
      o.n_ctx > 0 ? o.n_ctx : (*model)->hparams().n_ctx_train;
  if (n_ctx == 0) {
    std::fprintf(stderr, "kvault run: the model has no context_length; "
                         "pass --ctx C\n");
    return 2;
  }
  auto cache = MakeCache(**model, o, n_ctx);
  if (!cache.ok()) return Fail(cache.status());
  InferenceContext context(model->get(), cache->get(), compute);
  Generator generator(&context, SeqId(0));
  Sampler sampler(o.sampling);
  if (o.sampling.temperature > 0 && o.sampling.seed == kRandomSeed) {
    std::fprintf(stderr, "seed: %llu\n", (unsigned long long)sampler.seed());
  }
  GeneratorOptions gen_options;
  gen_options.max_new_tokens = o.num_predict;
  gen_options.prefill_chunk = o.batch;
  gen_options.n_ctx = n_ctx;
  StreamingDetokenizer detok(&tokenizer);
  bool first = true;
  auto emit = [&](TokenId id) {
    const std::string text =
        o.ids ? (first ? "" : " ") + std::to_string(id) : detok.Push(id);
    first = false;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  auto result = generator.Generate(prompt, &sampler, gen_options, emit);
  const std::string rest = o.ids ? "" : detok.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!result.ok()) return Fail(result.status());
  if (result->stop == StopReason::kContextFull) {
    std::fprintf(stderr, "kvault run: stopped, the context of %u tokens is "
                         "full (--ctx)\n", n_ctx);
  }
  const GenerationTimings& t = result->timings;
  std::fprintf(stderr, "prompt: %llu tok, %.2f tok/s | gen: %llu tok, %.2f "
               "tok/s\n",
               (unsigned long long)t.num_prompt_tokens, t.prompt_tok_per_s(),
               (unsigned long long)t.num_generated, t.gen_tok_per_s());
  return 0;
}

}  // namespace

StatusOr<LoadMode> ParseLoadMode(const Flags& f) {
  if (f.Has("mmap") && f.Has("no-mmap")) {
    return InvalidArgumentError("--mmap and --no-mmap contradict each other");
  }
  return f.Has("mmap") ? LoadMode::kMmap : LoadMode::kRead;
}

std::vector<std::string> ExpandShortFlags(
    const std::vector<std::string>& args,
    const std::map<std::string, std::string>& aliases) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    auto it = aliases.find(args[i]);
    out.push_back(it == aliases.end() ? args[i] : "--" + it->second);
    // A value is copied as is, even if it looks like a flag.
    if (it != aliases.end() && i + 1 < args.size()) out.push_back(args[++i]);
  }
  return out;
}

int RunRun(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(RunUsage().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> expanded = ExpandShortFlags(
      args, {{"-m", "model"}, {"-p", "prompt"}, {"-n", "n-predict"},
             {"-t", "threads"}});
  auto flags = Flags::Parse(expanded, {"ids", "mmap", "no-mmap"});
  StatusOr<RunOptions> options =
      flags.ok() ? ParseRun(*flags) : flags.status();
  if (!options.ok()) {
    std::fprintf(stderr, "kvault run: %s\n%s",
                 options.status().ToString().c_str(), RunUsage().c_str());
    return 2;
  }
  return Generate(*options);
}

}  // namespace kvault::apps
