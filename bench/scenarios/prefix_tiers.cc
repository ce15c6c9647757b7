#include "bench/scenarios/prefix_tiers.h"

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/scenarios/bench_models.h"
#include "bench/scenarios/ttft_util.h"
#include "core/memory_file.h"
#include "kv/disk_page_store.h"
#include "kv/kv_cache.h"
#include "kv/page_key.h"
#include "kv/prefix_store.h"
#include "kv/redis_page_store.h"
#include "kv/restore_job.h"
#include "kv/state_file.h"
#include "model/inference.h"

namespace kvault::bench {
namespace {

constexpr SeqId kSeq{0};

struct Setup {
  const LlamaModel* model;
  KvCache* cache;
  InferenceContext* ctx;
  const PrefixTiersOptions* o;
  std::vector<TokenId> tokens;   // L + 1: the history and the next token
  std::vector<TokenPos> wanted;  // the history as cells
  PageKey root;
  std::string disk_dir;
  // The history's state file, in memory (shared: a copy per run would
  // time the allocator's page faults, not the tier).
  std::shared_ptr<const std::string> ram_state;
};

// Decodes the next token after a cache holding the history.
Status DecodeNext(const Setup& s) {
  const uint32_t n = s.o->length;
  const BatchToken next{kSeq, s.tokens[n], static_cast<Pos>(n), true};
  return s.ctx->Decode(std::span(&next, 1)).status();
}

// A fresh prefix store over `tier`, as a restarted or other instance has.
std::unique_ptr<PrefixStore> StoreOver(const Setup& s,
                                       std::unique_ptr<PageStore> tier) {
  return std::make_unique<PrefixStore>(SingleTier(std::move(tier)),
                                       s.model->fingerprint(), s.root,
                                       SaveOptions{.sync = false});
}

StatusOr<std::unique_ptr<PageStore>> OpenDisk(const Setup& s) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<DiskPageStore> disk,
                      DiskPageStore::Open(Env::Default(), s.disk_dir,
                                          uint64_t{1} << 40, false));
  return std::unique_ptr<PageStore>(std::move(disk));
}

std::unique_ptr<RedisPageStore> OpenRedis(const Setup& s) {
  RedisPageStoreOptions r;
  r.endpoint = *ParseRedisUrl(s.o->redis_url);
  r.key_prefix = RedisPageKeyPrefix(s.root);
  return std::make_unique<RedisPageStore>(r, Env::Default());
}

// Loads the history from `store`, prefills what it lacked and the next
// token; sets *cached to the tokens it loaded.
Status ContinueFrom(const Setup& s, PrefixStore* store, uint64_t* cached) {
  const uint32_t n = s.o->length;
  *cached = store->Extend(s.cache, kSeq, s.wanted, 0, n);
  const std::span<const TokenId> rest = std::span(s.tokens).subspan(*cached);
  return Prefill(s.ctx, kSeq, rest, s.o->chunk, static_cast<Pos>(*cached));
}

// Times one way to the first token: `prepare` untimed, then `run`.
using Way = std::function<Status(uint64_t* cached)>;
StatusOr<PrefixTiersRow> TimeWay(const Setup& s, const std::string& source,
                                 const std::function<Status()>& prepare,
                                 const Way& run) {
  std::vector<double> ms;
  PrefixTiersRow row;
  row.source = source;
  for (uint32_t rep = 0; rep <= s.o->reps; ++rep) {  // rep 0: warm-up
    s.cache->Clear();
    KV_RETURN_IF_ERROR(prepare());
    const TtftClock::time_point t0 = TtftClock::now();
    KV_RETURN_IF_ERROR(run(&row.cached_tokens));
    if (rep > 0) ms.push_back(MsSince(t0));
  }
  row.ttft_ms = Median(ms);
  return row;
}

// Gets per record in the Redis read measurement.
constexpr int kReadPasses = 4;

// Publishes the history to the disk tier and (when asked) Redis, keeps its
// state file in memory, and measures Redis's throughput.
Status PublishHistory(Setup* s, PrefixTiersResult* result) {
  const uint32_t n = s->o->length;
  s->cache->Clear();
  KV_RETURN_IF_ERROR(
      Prefill(s->ctx, kSeq, std::span(s->tokens).first(n), s->o->chunk));
  KV_ASSIGN_OR_RETURN(
      SaveSnapshot snap,
      TakeSaveSnapshot(*s->cache, kSeq, s->model->fingerprint()));
  std::string state;
  StringWritableFile ram(&state);
  KV_RETURN_IF_ERROR(
      WriteSnapshot(*s->cache->storage(), snap, SaveOptions{}, &ram).status());
  s->ram_state = std::make_shared<const std::string>(std::move(state));
  KV_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> disk, OpenDisk(*s));
  KV_RETURN_IF_ERROR(StoreOver(*s, std::move(disk))->Publish(*s->cache, kSeq));
  const std::vector<PageKey> keys =
      PageKeyChain(s->root, s->wanted, s->cache->pool().page_size());
  result->num_records = keys.size();
  if (s->o->redis_url.empty()) return Status::Ok();
  // Write throughput: the records as the writer sends them, then reads.
  std::unique_ptr<RedisPageStore> redis = OpenRedis(*s);
  std::vector<std::string> records;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> reader, OpenDisk(*s));
  uint64_t bytes = 0;
  for (const PageKey& key : keys) {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, reader->Get(key));
    std::string r(f->size(), '\0');
    KV_RETURN_IF_ERROR(
        f->ReadAt(0, std::as_writable_bytes(std::span(r))).status());
    bytes += r.size();
    records.push_back(std::move(r));
  }
  result->record_bytes = records.empty() ? 0 : records[0].size();
  TtftClock::time_point t0 = TtftClock::now();
  for (size_t i = 0; i < keys.size(); ++i) {
    KV_RETURN_IF_ERROR(redis->Put(keys[i], std::move(records[i])));
  }
  redis->Flush();
  result->redis_write_gbps = bytes / (MsSince(t0) * 1e6);
  if (redis->Stats().puts != keys.size()) {
    return UnavailableError("redis at " + s->o->redis_url +
                            " did not take every record");
  }
  // As many Gets as redis-benchmark's GET run sends (4 per record, one
  // client, one at a time), so that the two figures compare.
  t0 = TtftClock::now();
  for (int pass = 0; pass < kReadPasses; ++pass) {
    for (const PageKey& key : keys) {
      KV_RETURN_IF_ERROR(redis->Get(key).status());
    }
  }
  result->redis_read_gbps = kReadPasses * bytes / (MsSince(t0) * 1e6);
  return Status::Ok();
}

StatusOr<std::string> MakeDir(const std::string& dir) {
  if (!dir.empty()) return dir;
  char templ[] = "/tmp/kvault-tiers-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    return IOError(std::string("prefix-tiers: mkdtemp ") + templ + " failed");
  }
  return std::string(templ);
}

// Runs every way and fills result->rows.
Status MeasureWays(const Setup& s, PrefixTiersResult* result) {
  const uint32_t n = s.o->length;
  const auto none = [] { return Status::Ok(); };
  const auto recompute = [&](uint64_t* cached) {
    *cached = 0;
    return Prefill(s.ctx, kSeq, s.tokens, s.o->chunk);
  };
  const auto history = [&] {
    return Prefill(s.ctx, kSeq, std::span(s.tokens).first(n), s.o->chunk);
  };
  const auto pool = [&](uint64_t* cached) {
    *cached = n;
    return DecodeNext(s);
  };
  const auto ram = [&](uint64_t* cached) {
    StringRandomAccessFile file(s.ram_state);
    KV_ASSIGN_OR_RETURN(
        RestoreResult r,
        RestoreSequence(file, s.model->fingerprint(), kSeq, s.cache));
    *cached = r.num_tokens;
    return DecodeNext(s);
  };
  std::unique_ptr<PrefixStore> store;
  const auto restart_disk = [&]() -> Status {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> disk, OpenDisk(s));
    store = StoreOver(s, std::move(disk));
    return Status::Ok();
  };
  const auto other_instance = [&]() -> Status {
    store = StoreOver(s, OpenRedis(s));
    return Status::Ok();
  };
  const auto from_store = [&](uint64_t* cached) {
    return ContinueFrom(s, store.get(), cached);
  };
  struct W {
    const char* source;
    std::function<Status()> prepare;
    Way run;
  };
  std::vector<W> ways = {{"recompute", none, recompute},
                         {"pool", history, pool},
                         {"ram", none, ram},
                         {"disk", restart_disk, from_store}};
  if (!s.o->redis_url.empty()) {
    ways.push_back({"redis", other_instance, from_store});
  }
  for (const W& w : ways) {
    KV_ASSIGN_OR_RETURN(PrefixTiersRow row,
                        TimeWay(s, w.source, w.prepare, w.run));
    result->rows.push_back(row);
  }
  for (PrefixTiersRow& row : result->rows) {
    row.speedup = result->rows[0].ttft_ms / row.ttft_ms;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PrefixTiersResult> RunPrefixTiers(const PrefixTiersOptions& o) {
  if (o.length == 0 || o.threads == 0 || o.reps == 0 || o.chunk == 0 ||
      o.page_size == 0) {
    return InvalidArgumentError(
        "prefix-tiers: need a length, threads, reps, chunk, page size");
  }
  if (!o.redis_url.empty())
    KV_RETURN_IF_ERROR(ParseRedisUrl(o.redis_url).status());
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.threads;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                      LoadModelOrSmall(o.model_path, compute.isa));
  KvCacheOptions cache_options;
  cache_options.page_size = o.page_size;
  cache_options.num_pages = (o.length + 1) / o.page_size + 2;
  cache_options.layout = model->KvLayoutFor(o.cache_type);
  KV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      KvCache::Create(cache_options));
  InferenceContext ctx(model.get(), cache.get(), compute);
  KV_ASSIGN_OR_RETURN(std::string dir, MakeDir(o.dir));
  Setup s{model.get(), cache.get(), &ctx, &o, {}, {}, {}, dir + "/prefix", {}};
  std::mt19937_64 rng(o.seed);
  for (uint32_t i = 0; i <= o.length; ++i) {
    s.tokens.push_back(static_cast<TokenId>(rng() % model->n_vocab()));
    if (i < o.length) s.wanted.push_back({s.tokens[i], static_cast<Pos>(i)});
  }
  s.root =
      ChainRoot(model->fingerprint(), *cache_options.layout, o.page_size, 0);
  PrefixTiersResult result;
  result.model = o.model_path.empty() ? "small (generated)" : o.model_path;
  result.threads = o.threads;
  result.reps = o.reps;
  result.num_tokens = o.length;
  Status status = PublishHistory(&s, &result);
  if (status.ok()) status = MeasureWays(s, &result);
  std::error_code ec;
  if (o.dir.empty()) std::filesystem::remove_all(dir, ec);
  KV_RETURN_IF_ERROR(status);
  return result;
}

std::string PrefixTiersJson(const PrefixTiersResult& r) {
  std::string out;
  for (const PrefixTiersRow& row : r.rows) {
    nlohmann::ordered_json j;
    j["model"] = r.model;
    j["threads"] = r.threads;
    j["reps"] = r.reps;
    j["n_tokens"] = r.num_tokens;
    j["source"] = row.source;
    j["ttft_ms"] = row.ttft_ms;
    j["speedup"] = row.speedup;
    j["cached_tokens"] = row.cached_tokens;
    out += j.dump() + "\n";
  }
  nlohmann::ordered_json t;
  t["record_bytes"] = r.record_bytes;
  t["num_records"] = r.num_records;
  t["redis_write_gbps"] = r.redis_write_gbps;
  t["redis_read_gbps"] = r.redis_read_gbps;
  out += t.dump() + "\n";
  return out;
}

}  // namespace kvault::bench
