// Shared helpers of the engine tests: models (the real stories260K and
// small generated ones), a recording sink, and the single-sequence
// reference generation every engine output is compared with.
#ifndef KVAULT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define KVAULT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/memory_file.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "model/gen_model.h"
#include "model/generator.h"
#include "model/gguf_file.h"
#include "model/inference.h"
#include "model/llama_model.h"

namespace kvault {
namespace engine_test {

inline std::string StoriesPath() {
  return std::string(KVAULT_SOURCE_DIR) + "/../shared/models/stories260K.gguf";
}

// Returns the real model, or null when the file is missing.
inline std::unique_ptr<LlamaModel> LoadStories() {
  if (!std::ifstream(StoriesPath())) return nullptr;
  auto model = LlamaModel::Load(StoriesPath());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

// Returns a small random model (byte vocab of 259 tokens) for `seed`.
inline std::unique_ptr<LlamaModel> MakeGenModel(uint64_t seed) {
  GenModelOptions options;
  options.n_embd = 32;
  options.n_layer = 2;
  options.n_head = 4;
  options.n_ff = 64;
  options.n_ctx = 512;
  options.seed = seed;
  auto image = std::make_shared<std::string>();
  StringWritableFile out(image.get());
  auto generated = GenerateLlamaModel(options, &out);
  EXPECT_TRUE(generated.ok()) << generated.status();
  auto file = GgufFile::FromBuffer(std::shared_ptr<const std::string>(image));
  EXPECT_TRUE(file.ok()) << file.status();
  auto model = LlamaModel::FromGguf(std::move(file).value());
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(model).value();
}

// Returns `n` deterministic ordinary tokens of the byte vocab (ids >= 3).
inline std::vector<TokenId> GenPrompt(size_t n, uint32_t salt) {
  std::vector<TokenId> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(3 + static_cast<TokenId>((i * 31 + salt * 17 + 7) % 250));
  }
  return out;
}

// Greedy single-sequence reference: the tokens a solo Generator produces
// for `prompt` in a fresh cache of `dtype`.
inline std::vector<TokenId> SoloGreedy(const LlamaModel& model,
                                       const std::vector<TokenId>& prompt,
                                       uint32_t n_predict, bool stop_at_eog,
                                       KvDtype dtype = KvDtype::kF16) {
  KvCacheOptions options;
  options.page_size = 16;
  options.num_pages = (prompt.size() + n_predict + 32) / 16 + 1;
  options.layout = model.KvLayoutFor(dtype);
  auto cache = KvCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status();
  InferenceContext context(&model, cache->get());
  Generator generator(&context, SeqId(0));
  Sampler sampler(SamplingParams::Greedy());
  GeneratorOptions gen;
  gen.max_new_tokens = n_predict;
  gen.stop_at_eog = stop_at_eog;
  auto result = generator.Generate(prompt, &sampler, gen);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->tokens : std::vector<TokenId>{};
}

// Records the order of sink events across several sinks.
struct EventLog {
  std::mutex mu;
  std::vector<std::string> events;  // "<name>:token" or "<name>:done"
  void Add(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  }
  std::vector<std::string> Snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

class RecordingSink : public CompletionSink {
 public:
  explicit RecordingSink(std::string name = "", EventLog* log = nullptr)
      : name_(std::move(name)), log_(log) {}

  // Returning false from the k-th token (1-based) on.
  void CancelAtToken(size_t k) { cancel_at_ = k; }
  // Runs `hook` with the token count on each token (on the scheduler
  // thread; tests use it to hold the engine at a known point).
  void OnEachToken(std::function<void(size_t)> hook) { hook_ = std::move(hook); }

  bool OnToken(const TokenEvent& event) override {
    size_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tokens_.push_back(event.token);
      text_ += event.text;
      events_.push_back(event);
      n = tokens_.size();
    }
    if (log_ != nullptr) log_->Add(name_ + ":token");
    if (hook_) hook_(n);
    return cancel_at_ == 0 || n < cancel_at_;
  }
  void OnPromptProgress(const PromptProgress& progress) override {
    std::lock_guard<std::mutex> lock(mu_);
    progress_.push_back({progress, tokens_.size()});
  }
  void OnDone(const StatusOr<CompletionResult>& result) override {
    if (log_ != nullptr) log_->Add(name_ + ":done");
    std::lock_guard<std::mutex> lock(mu_);
    ++num_done_;
    result_ = result;
    cv_.notify_all();
  }
  // Blocks until OnDone; returns its argument.
  StatusOr<CompletionResult> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return num_done_ > 0; });
    return *result_;
  }
  std::vector<TokenId> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  std::vector<TokenEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int num_done() {
    std::lock_guard<std::mutex> lock(mu_);
    return num_done_;
  }
  // A progress report and the number of tokens received before it.
  struct ProgressSeen {
    PromptProgress progress;
    size_t tokens_before = 0;
  };
  std::vector<ProgressSeen> progress() {
    std::lock_guard<std::mutex> lock(mu_);
    return progress_;
  }

 private:
  std::string name_;
  EventLog* log_;
  size_t cancel_at_ = 0;
  std::function<void(size_t)> hook_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenId> tokens_;
  std::string text_;
  std::vector<TokenEvent> events_;
  std::vector<ProgressSeen> progress_;
  int num_done_ = 0;
  std::optional<StatusOr<CompletionResult>> result_;
};

// Greedy completion parameters.
inline CompletionParams Greedy(std::vector<TokenId> prompt, int32_t n_predict,
                               std::optional<uint32_t> slot = std::nullopt) {
  CompletionParams p;
  p.prompt = std::move(prompt);
  p.n_predict = n_predict;
  p.sampling = SamplingParams::Greedy();
  p.slot = slot;
  return p;
}

// Submits and waits; fails the test on a submit error.
inline StatusOr<CompletionResult> RunToEnd(Engine* engine,
                                           CompletionParams params) {
  auto sink = std::make_shared<RecordingSink>();
  auto id = engine->Submit(std::move(params), sink);
  if (!id.ok()) return id.status();
  return sink->Wait();
}

// Returns `a` followed by `b`.
inline std::vector<TokenId> Concat(std::vector<TokenId> a,
                                   const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A fresh directory under the test temp dir.
inline std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/kvault_engine_" + name +
                          "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace engine_test
}  // namespace kvault

#endif  // KVAULT_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
