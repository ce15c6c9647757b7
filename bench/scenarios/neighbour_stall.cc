#include "bench/scenarios/neighbour_stall.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"
#include "model/demo_model.h"

namespace kvault::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Records token arrival times and wakes the driver after enough tokens.
class ArrivalLog : public CompletionSink {
 public:
  ArrivalLog(uint32_t slot, Clock::time_point t0, std::mutex* mu,
             std::condition_variable* cv, std::vector<TokenArrival>* out,
             uint32_t* num_done)
      : slot_(slot), t0_(t0), mu_(mu), cv_(cv), out_(out),
        num_done_(num_done) {}
  bool OnToken(const TokenEvent&) override {
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - t0_).count();
    std::lock_guard lock(*mu_);
    out_->push_back({slot_, ms});
    cv_->notify_all();
    return true;
  }
  void OnDone(const StatusOr<CompletionResult>& result) override {
    std::lock_guard lock(*mu_);
    if (!result.ok()) status_ = result.status();
    ++*num_done_;
    cv_->notify_all();
  }
  Status status() const { return status_; }

 private:
  uint32_t slot_;
  Clock::time_point t0_;
  std::mutex* mu_;
  std::condition_variable* cv_;
  std::vector<TokenArrival>* out_;
  uint32_t* num_done_;
  Status status_;
};

// Loads `path` laid out for `isa`'s kernels, or generates the small model.
StatusOr<std::unique_ptr<LlamaModel>> LoadBenchModel(const std::string& path,
                                                     kernels::Isa isa) {
  if (!path.empty()) return LlamaModel::Load(path, LoadMode::kRead, isa);
  GenModelOptions g = DemoModelOptions();
  g.n_embd = 512, g.n_layer = 8, g.n_head = 8, g.n_head_kv = 4;
  g.n_ff = 1408, g.type = GgmlType::kQ8_0, g.n_ctx = 1u << 20;
  return GenerateModelInMemory(g);
}

// Writes a state file of `num_tokens` random cells for `model` to `path`.
StatusOr<uint64_t> WriteRandomStateFile(const LlamaModel& model,
                                        uint64_t num_tokens,
                                        const std::string& path) {
  KvCacheOptions o;
  o.page_size = 256;
  o.num_pages = static_cast<uint32_t>((num_tokens + 255) / 256);
  o.layout = model.KvLayoutFor(KvDtype::kF16);
  KV_ASSIGN_OR_RETURN(auto cache, KvCache::Create(o));
  std::vector<TokenPos> tokens(num_tokens);
  std::mt19937 rng(7);
  for (uint64_t i = 0; i < num_tokens; ++i) {
    tokens[i] = {static_cast<TokenId>(rng() % model.n_vocab()),
                 static_cast<Pos>(i)};
  }
  KV_ASSIGN_OR_RETURN(auto cells, cache->Append(SeqId(0), tokens));
  std::vector<float> row(o.layout->k_row_elems());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : row) v = normal(rng);
  for (uint32_t layer = 0; layer < o.layout->num_layers; ++layer) {
    for (CellId cell : cells) {
      cache->storage()->Write(KvSide::kK, layer, cell, row);
      cache->storage()->Write(KvSide::kV, layer, cell, row);
    }
  }
  SaveOptions save;
  save.sync = false;
  KV_ASSIGN_OR_RETURN(SaveResult r,
                      SaveSequenceToFile(Env::Default(), *cache, SeqId(0),
                                         model.fingerprint(), path, save));
  return r.bytes_written;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  return v[i];
}

// Fills r's ratio_same_depth_* from the during-gaps (arrival ms, gap ms).
void SameDepthRatios(const std::vector<std::pair<double, double>>& during,
                     NeighbourStallResult* r) {
  if (r->itl_median_after_ms <= 0 || r->itl_median_before_ms <= 0) return;
  const double span = std::max(r->restore_end_ms - r->restore_begin_ms, 1e-9);
  std::vector<double> ratios;
  for (const auto& [ms, gap] : during) {
    const double f = std::clamp((ms - r->restore_begin_ms) / span, 0.0, 1.0);
    const double idle = r->itl_median_before_ms +
                        f * (r->itl_median_after_ms - r->itl_median_before_ms);
    ratios.push_back(gap / idle);
  }
  r->ratio_same_depth_p50 = Percentile(ratios, 0.5);
  r->ratio_same_depth_p99 = Percentile(ratios, 0.99);
  r->ratio_same_depth_max = Percentile(ratios, 1.0);
}

// Splits each slot's inter-token gaps by when the later token arrived.
void Summarise(NeighbourStallResult* r) {
  std::vector<std::pair<double, double>> timed_during;
  std::vector<double> before, during, after, all;
  std::map<uint32_t, double> last;
  for (const TokenArrival& a : r->arrivals) {
    auto it = last.find(a.slot);
    if (it != last.end()) {
      const double gap = a.ms - it->second;
      all.push_back(gap);
      if (a.ms < r->restore_begin_ms) before.push_back(gap);
      // A gap overlapping the restore window counts as "during".
      if (a.ms >= r->restore_begin_ms && it->second <= r->restore_end_ms) {
        during.push_back(gap);
        timed_during.emplace_back(a.ms, gap);
      }
      if (it->second > r->restore_end_ms) after.push_back(gap);
    }
    last[a.slot] = a.ms;
  }
  r->itl_median_before_ms = Percentile(before, 0.5);
  r->itl_max_before_ms = Percentile(before, 1.0);
  r->itl_median_during_ms = Percentile(during, 0.5);
  r->itl_max_during_ms = Percentile(during, 1.0);
  r->itl_p99_ms = Percentile(all, 0.99);
  r->itl_p99_before_ms = Percentile(before, 0.99);
  r->itl_p99_during_ms = Percentile(during, 0.99);
  r->itl_median_after_ms = Percentile(after, 0.5);
  r->itl_p99_after_ms = Percentile(after, 0.99);
  r->itl_max_after_ms = Percentile(after, 1.0);
  SameDepthRatios(timed_during, r);
}

// Tells the driver when the prefilled request has finished.
class DoneLatch : public CompletionSink {
 public:
  DoneLatch(std::mutex* mu, std::condition_variable* cv) : mu_(mu), cv_(cv) {}
  bool OnToken(const TokenEvent&) override { return true; }
  void OnDone(const StatusOr<CompletionResult>& result) override {
    std::lock_guard lock(*mu_);
    status_ = result.status();
    done_ = true;
    cv_->notify_all();
  }
  bool done() const { return done_; }
  Status status() const { return status_; }

 private:
  std::mutex* mu_;
  std::condition_variable* cv_;
  bool done_ = false;
  Status status_;
};

// Feeds a prompt of `tokens` random ids to `slot` and waits until it is
// done; the window [*begin, *end] is on the arrival clock t0. Then lets
// the generating slots run 100 more tokens each.
Status PrefillWhileGenerating(Engine& engine, const NeighbourStallOptions& o,
                              Clock::time_point t0, std::mutex& mu,
                              std::condition_variable& cv,
                              const std::vector<TokenArrival>& arrivals,
                              const uint32_t& num_done, double* begin,
                              double* end) {
  CompletionParams p;
  std::mt19937 rng(11);
  for (uint32_t i = 0; i < o.prefill_tokens; ++i) {
    p.prompt.push_back(static_cast<TokenId>(3 + rng() % 200));
  }
  p.n_predict = 1;
  p.sampling = SamplingParams::Greedy();
  p.slot = o.num_generating;
  auto latch = std::make_shared<DoneLatch>(&mu, &cv);
  auto ms_now = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0)
        .count();
  };
  *begin = ms_now();
  KV_RETURN_IF_ERROR(engine.Submit(std::move(p), latch).status());
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return latch->done(); });
  *end = ms_now();
  const size_t want = arrivals.size() + 100 * size_t{o.num_generating};
  cv.wait(lock, [&] {
    return arrivals.size() >= want || num_done == o.num_generating;
  });
  return latch->status();
}

// Returns `dir`, or a new temporary directory when it is empty.
StatusOr<std::string> StallDir(const std::string& dir) {
  if (!dir.empty()) return dir;
  std::string tmpl = "/tmp/kvault-stall-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return IOError("mkdtemp failed");
  return tmpl;
}

// The engine: the generating slots, and one more slot big enough for the
// restored sequence or the prompt.
EngineOptions StallEngineOptions(const NeighbourStallOptions& options,
                                 uint64_t restore_tokens) {
  EngineOptions e;
  e.compute = options.compute;
  e.n_slots = options.num_generating + 1;
  const uint64_t per_slot = 64 + options.num_gen;
  const uint64_t big = std::max<uint64_t>(
      options.prefill_tokens > 0 ? options.prefill_tokens : restore_tokens,
      per_slot);
  e.n_ctx_total = static_cast<uint32_t>(big + per_slot * e.n_slots + 1024);
  e.ctx_per_slot = static_cast<uint32_t>(big + 16);
  if (options.prefill_step_share >= 0) {
    e.prefill_step_share = options.prefill_step_share;
  }
  e.num_threads = options.threads;
  e.spill_ram_bytes = 0;
  return e;
}

}  // namespace

StatusOr<NeighbourStallResult> RunNeighbourStall(
    const NeighbourStallOptions& options) {
  KV_ASSIGN_OR_RETURN(auto model,
                      LoadBenchModel(options.model_path, options.compute.isa));
  const uint64_t cell_bytes = model->KvLayoutFor(KvDtype::kF16).cell_bytes();
  const uint64_t restore_tokens = std::max<uint64_t>(
      1, static_cast<uint64_t>(options.restore_mb * 1048576.0 / cell_bytes));
  KV_ASSIGN_OR_RETURN(const std::string dir, StallDir(options.dir));
  const std::string path = dir + "/restore.kvstate";
  NeighbourStallResult r;
  r.restore_tokens = restore_tokens;
  if (options.prefill_tokens == 0) {
    KV_ASSIGN_OR_RETURN(r.restore_bytes,
                        WriteRandomStateFile(*model, restore_tokens, path));
  } else {
    r.restore_tokens = options.prefill_tokens;
  }

  KV_ASSIGN_OR_RETURN(auto engine,
                      Engine::Create(std::move(model),
                                     StallEngineOptions(options, restore_tokens)));

  std::mutex mu;
  std::condition_variable cv;
  uint32_t num_done = 0;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<ArrivalLog>> sinks;
  std::vector<uint64_t> task_ids;
  for (uint32_t s = 0; s < options.num_generating; ++s) {
    auto sink = std::make_shared<ArrivalLog>(s, t0, &mu, &cv, &r.arrivals,
                                             &num_done);
    CompletionParams p;
    p.prompt = {1, static_cast<TokenId>(10 + s), 20, 30};
    p.n_predict = static_cast<int32_t>(options.num_gen);
    p.sampling = SamplingParams::Greedy();
    p.ignore_eos = true;
    p.slot = s;
    KV_ASSIGN_OR_RETURN(uint64_t id, engine->Submit(std::move(p), sink));
    task_ids.push_back(id);
    sinks.push_back(std::move(sink));
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] {
      return r.arrivals.size() >=
                 uint64_t{options.restore_after} * options.num_generating ||
             num_done == options.num_generating;
    });
  }
  double begin = 0, end = 0;
  if (options.prefill_tokens > 0) {
    KV_RETURN_IF_ERROR(PrefillWhileGenerating(
        *engine, options, t0, mu, cv, r.arrivals, num_done, &begin, &end));
    for (uint64_t id : task_ids) engine->Cancel(id);
  } else {
    begin = std::chrono::duration<double, std::milli>(Clock::now() - t0)
                .count();
    auto restored = engine->RestoreSlot(options.num_generating, path);
    end = std::chrono::duration<double, std::milli>(Clock::now() - t0)
              .count();
    if (!restored.ok()) return restored.status();
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return num_done == options.num_generating; });
  }
  for (const auto& sink : sinks) {
    const Status st = sink->status();
    if (!st.ok() && st.reason() != kReasonCancelled) return st;
  }
  engine->Shutdown();
  std::filesystem::remove(path);
  if (options.dir.empty()) std::filesystem::remove(dir);
  r.restore_ms = end - begin;
  r.restore_begin_ms = begin;
  r.restore_end_ms = end;
  Summarise(&r);
  return r;
}

std::string NeighbourStallJson(const NeighbourStallResult& r,
                               bool with_arrivals) {
  nlohmann::json j = {{"restore_tokens", r.restore_tokens},
                      {"restore_bytes", r.restore_bytes},
                      {"restore_ms", r.restore_ms},
                      {"restore_begin_ms", r.restore_begin_ms},
                      {"restore_end_ms", r.restore_end_ms},
                      {"itl_median_before_ms", r.itl_median_before_ms},
                      {"itl_max_before_ms", r.itl_max_before_ms},
                      {"itl_median_during_ms", r.itl_median_during_ms},
                      {"itl_max_during_ms", r.itl_max_during_ms},
                      {"itl_p99_ms", r.itl_p99_ms},
                      {"itl_p99_before_ms", r.itl_p99_before_ms},
                      {"itl_p99_during_ms", r.itl_p99_during_ms},
                      {"itl_median_after_ms", r.itl_median_after_ms},
                      {"itl_p99_after_ms", r.itl_p99_after_ms},
                      {"itl_max_after_ms", r.itl_max_after_ms},
                      {"ratio_same_depth_p50", r.ratio_same_depth_p50},
                      {"ratio_same_depth_p99", r.ratio_same_depth_p99},
                      {"ratio_same_depth_max", r.ratio_same_depth_max}};
  if (with_arrivals) {
    nlohmann::json a = nlohmann::json::array();
    for (const TokenArrival& t : r.arrivals) a.push_back({t.slot, t.ms});
    j["arrivals"] = a;
  }
  return j.dump();
}

}  // namespace kvault::bench
