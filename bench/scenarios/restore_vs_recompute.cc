#include "bench/scenarios/restore_vs_recompute.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>

#include "bench/scenarios/bench_models.h"
#include "bench/scenarios/ttft_util.h"
#include "core/env.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"
#include "model/inference.h"

namespace kvault::bench {
namespace {

using Clock = TtftClock;
constexpr SeqId kSeq{0};

struct Setup {
  const LlamaModel* model;
  KvCache* cache;
  InferenceContext* ctx;
  const RestoreVsRecomputeOptions* options;
  std::string dir;
};

// Saves a conversation of `n` random tokens and times both ways to continue
// it with tokens[n].
StatusOr<RestoreVsRecomputeRow> MeasureLength(const Setup& s, uint32_t n,
                                              std::mt19937_64* rng) {
  std::vector<TokenId> tokens(n + 1);
  for (TokenId& t : tokens) t = static_cast<TokenId>((*rng)() % s.model->n_vocab());
  const std::span<const TokenId> all(tokens);
  const uint32_t chunk = s.options->chunk;
  const std::string path = s.dir + "/conv-" + std::to_string(n) + ".kvstate";
  s.cache->Clear();
  KV_RETURN_IF_ERROR(Prefill(s.ctx, kSeq, all.first(n), chunk));
  SaveOptions save;
  save.sync = false;
  KV_ASSIGN_OR_RETURN(SaveResult saved,
                      SaveSequenceToFile(Env::Default(), *s.cache, kSeq,
                                         s.model->fingerprint(), path, save));
  RestoreVsRecomputeRow row;
  row.num_tokens = n;
  row.file_bytes = saved.bytes_written;
  std::vector<double> restore_ms, io_ms, recompute_ms;
  for (uint32_t rep = 0; rep <= s.options->reps; ++rep) {  // rep 0: warm-up
    s.cache->Clear();
    Clock::time_point t0 = Clock::now();
    KV_ASSIGN_OR_RETURN(RestoreResult restored,
                        RestoreSequenceFromFile(Env::Default(), path,
                                                s.model->fingerprint(), kSeq,
                                                s.cache));
    const BatchToken next{kSeq, tokens[n], static_cast<Pos>(n), true};
    KV_RETURN_IF_ERROR(s.ctx->Decode(std::span(&next, 1)).status());
    const double restore = MsSince(t0);
    s.cache->Clear();
    t0 = Clock::now();
    KV_RETURN_IF_ERROR(Prefill(s.ctx, kSeq, all, chunk));
    const double recompute = MsSince(t0);
    if (rep == 0) continue;
    restore_ms.push_back(restore);
    io_ms.push_back(restored.elapsed_ms);
    recompute_ms.push_back(recompute);
  }
  std::filesystem::remove(path);
  row.restore_ttft_ms = Median(restore_ms);
  row.restore_io_ms = Median(io_ms);
  row.recompute_ttft_ms = Median(recompute_ms);
  row.speedup = row.recompute_ttft_ms / row.restore_ttft_ms;
  return row;
}

StatusOr<std::string> MakeDir(const std::string& dir) {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IOError("restore-vs-recompute: mkdir " + dir + ": " + ec.message());
    return dir;
  }
  char templ[] = "/tmp/kvault-rvr-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    return IOError(std::string("restore-vs-recompute: mkdtemp ") + templ +
                   " failed, errno " + std::to_string(errno));
  }
  return std::string(templ);
}

}  // namespace

StatusOr<RestoreVsRecomputeResult> RunRestoreVsRecompute(
    const RestoreVsRecomputeOptions& o) {
  if (o.lengths.empty() || o.threads == 0 || o.reps == 0 || o.chunk == 0 ||
      o.page_size == 0) {
    return InvalidArgumentError(
        "restore-vs-recompute: need lengths, threads, reps, chunk, page size");
  }
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.threads;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                      LoadModelOrSmall(o.model_path, compute.isa));
  const uint32_t max_len = *std::max_element(o.lengths.begin(), o.lengths.end());
  KvCacheOptions cache_options;
  cache_options.page_size = o.page_size;
  cache_options.num_pages = (max_len + 1) / o.page_size + 2;
  cache_options.layout = model->KvLayoutFor(o.cache_type);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      KvCache::Create(cache_options));
  InferenceContext ctx(model.get(), cache.get(), compute);
  KV_ASSIGN_OR_RETURN(std::string dir, MakeDir(o.dir));
  const Setup setup{model.get(), cache.get(), &ctx, &o, dir};
  RestoreVsRecomputeResult result;
  result.model = o.model_path.empty() ? "small (generated)" : o.model_path;
  result.threads = o.threads;
  result.reps = o.reps;
  std::mt19937_64 rng(o.seed);
  Status status = Status::Ok();
  for (uint32_t n : o.lengths) {
    StatusOr<RestoreVsRecomputeRow> row = MeasureLength(setup, n, &rng);
    if (!row.ok()) {
      status = row.status();
      break;
    }
    result.rows.push_back(*row);
  }
  std::error_code ec;
  if (o.dir.empty()) std::filesystem::remove_all(dir, ec);
  KV_RETURN_IF_ERROR(status);
  return result;
}

std::string RestoreVsRecomputeJson(const RestoreVsRecomputeResult& r) {
  std::string out;
  for (const RestoreVsRecomputeRow& row : r.rows) {
    nlohmann::ordered_json j;
    j["model"] = r.model;
    j["threads"] = r.threads;
    j["reps"] = r.reps;
    j["n_tokens"] = row.num_tokens;
    j["file_bytes"] = row.file_bytes;
    j["restore_ttft_ms"] = row.restore_ttft_ms;
    j["restore_io_ms"] = row.restore_io_ms;
    j["recompute_ttft_ms"] = row.recompute_ttft_ms;
    j["speedup"] = row.speedup;
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace kvault::bench
