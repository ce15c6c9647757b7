// Engine: options, construction, the public API, the scheduler thread's
// loop and the snapshots readers see.
#include "engine/engine.h"

#include <algorithm>
#include <future>
#include <utility>

#include "core/checksum.h"
#include "core/log.h"
#include "engine/engine_impl.h"
#include "kv/disk_page_store.h"
#include "kv/page_key.h"
#include "kv/redis_page_store.h"

namespace kvault {
namespace {

// Returns the scheduler's options for engine options `o` and a model of
// hyperparameters `h`.
SchedulerOptions MakeSchedulerOptions(const EngineOptions& o,
                                      const LlamaHparams& h) {
  SchedulerOptions s;
  s.n_slots = o.n_slots;
  s.max_batch_tokens = o.max_batch_tokens;
  s.prefill_chunk = o.prefill_chunk;
  s.on_kv_full = o.on_kv_full;
  s.prefix_cache = o.prefix_cache;
  s.cache_idle_slots = o.cache_idle_slots;
  s.generation.ctx_per_slot = o.ctx_per_slot;
  s.generation.context_shift = o.context_shift;
  s.generation.n_ctx_train = h.n_ctx_train;
  s.jobs.io_timeout_ms = o.slot_io_timeout_ms;
  s.jobs.max_stuck = o.n_slots;
  const uint64_t q_width = uint64_t{h.n_head} * h.n_embd_head_k;
  const uint64_t weights_per_layer =
      uint64_t{h.n_embd} * (q_width + 2 * uint64_t{h.n_embd_k_gqa()}) +
      uint64_t{h.n_head} * h.n_embd_head_v * h.n_embd +
      3 * uint64_t{h.n_embd} * h.n_ff;
  s.pacer = PrefillPacer(o.prefill_step_share,
                         TokenCellsForShape(weights_per_layer, h.n_head,
                                            h.n_embd_head_k, h.n_embd_head_v));
  return s;
}

// InvalidArgument (reason slot_out_of_range) for a slot index not under
// `n_slots`.
Status CheckSlot(uint32_t slot, uint32_t n_slots) {
  if (slot < n_slots) return Status::Ok();
  return InvalidArgumentError("slot " + std::to_string(slot) +
                              " out of range [0, " + std::to_string(n_slots) +
                              ")")
      .WithReason(kReasonSlotOutOfRange);
}

// The checks Submit makes before queueing: slot, prompt length and ids,
// sampling settings.
// Returns a hash of the RoPE settings, which shape every K row: a record
// written under other settings has another chain root.
uint64_t RopeConfigHash(const LlamaHparams& h) {
  const float floats[3] = {h.rope_freq_base, h.rope_freq_scale(),
                           h.rope_scaling_factor};
  const uint32_t ints[3] = {h.n_rot, h.rope_scaling_orig_ctx,
                            static_cast<uint32_t>(h.rope_scaling_type)};
  return Xxh3_64WithSeed(floats, sizeof(floats), Xxh3_64(ints, sizeof(ints)));
}

// Opens the persistent prefix store the options ask for (null: none): the
// disk tier, then the shared remote tier. Records are not fsynced: they
// are a cache, checked whenever read, and a killed process's page-cache
// writes survive it.
// The shared store's endpoint with its credentials.
StatusOr<RedisEndpoint> StoreEndpoint(const EngineOptions& o) {
  KV_ASSIGN_OR_RETURN(RedisEndpoint endpoint, ParseRedisUrl(o.kv_store_url));
  endpoint.user = o.kv_store_user;
  endpoint.password = o.kv_store_password;
  return endpoint;
}

StatusOr<std::unique_ptr<PrefixStore>> OpenPrefixStore(const EngineOptions& o,
                                                       const LlamaModel& model,
                                                       const KvLayout& layout) {
  Env* env = o.env != nullptr ? o.env : Env::Default();
  const PageKey root = ChainRoot(model.fingerprint(), layout, o.page_size,
                                 RopeConfigHash(model.hparams()));
  std::vector<std::unique_ptr<PageStore>> tiers;
  if (o.prefix_disk_bytes > 0) {
    KV_ASSIGN_OR_RETURN(
        std::unique_ptr<DiskPageStore> disk,
        DiskPageStore::Open(env, o.prefix_dir, o.prefix_disk_bytes,
                            /*sync=*/false));
    tiers.push_back(std::move(disk));
  }
  if (!o.kv_store_url.empty()) {
    RedisPageStoreOptions redis;
    KV_ASSIGN_OR_RETURN(redis.endpoint, StoreEndpoint(o));
    redis.key_prefix = RedisPageKeyPrefix(root);
    KV_LOG(INFO) << "prefix store: remote tier " << redis.endpoint.ToString()
                 << ", keys " << redis.key_prefix << "*";
    tiers.push_back(std::make_unique<RedisPageStore>(redis, env));
  }
  if (tiers.empty()) return std::unique_ptr<PrefixStore>();
  SaveOptions save;
  save.sync = false;
  return std::make_unique<PrefixStore>(std::move(tiers), model.fingerprint(),
                                       root, save, o.store_mac);
}

Status ValidateParams(const CompletionParams& params,
                      const EngineOptions& options, TokenId n_vocab) {
  if (params.slot) {
    KV_RETURN_IF_ERROR(CheckSlot(*params.slot, options.n_slots));
  }
  if (params.prompt.empty()) {
    return InvalidArgumentError("empty prompt").WithReason(kReasonEmptyPrompt);
  }
  if (params.prompt.size() > options.ctx_per_slot) {
    return InvalidArgumentError("prompt of " +
                                std::to_string(params.prompt.size()) +
                                " tokens exceeds the slot context of " +
                                std::to_string(options.ctx_per_slot))
        .WithReason(kReasonPromptTooLong);
  }
  for (size_t i = 0; i < params.prompt.size(); ++i) {
    const TokenId t = params.prompt[i];
    if (t < 0 || t >= n_vocab) {
      return InvalidArgumentError("prompt token " + std::to_string(i) + " = " +
                                  std::to_string(t) + " out of range [0, " +
                                  std::to_string(n_vocab) + ")")
          .WithReason(kReasonInvalidToken);
    }
  }
  return params.sampling.Validate();
}

// Takes back the slots a disk tier kept from an earlier run; drops (with a
// warning) what cannot come back and what belongs to no slot.
void RecoverSpilledSlots(KvVault& vault, const KvCache& cache,
                         Scheduler& scheduler) {
  const size_t num_slots = scheduler.state().slots.size();
  for (SeqId seq : vault.SpilledSequences()) {
    if (seq.value() < num_slots) {
      StatusOr<std::optional<VaultRestoreResult>> back =
          vault.EnsureResident(seq);
      if (back.ok()) {
        Slot probe(seq.value());
        RefreshCached(cache, probe);
        KV_LOG(INFO) << "slot " << seq.value() << ": recovered "
                     << probe.cached.size() << " tokens from the disk tier";
        scheduler.AdoptRecovered(seq.value(), std::move(probe.cached));
        continue;
      }
      KV_LOG(WARNING) << "slot " << seq.value()
                      << ": dropping the KV an earlier run spilled: "
                      << back.status();
    }
    Status erased = vault.Erase(seq);
    if (!erased.ok()) KV_LOG(WARNING) << erased;
  }
}

}  // namespace

StatusOr<OnKvFull> ParseOnKvFull(std::string_view text) {
  if (text == "refuse") return OnKvFull::kRefuse;
  if (text == "drop-lru") return OnKvFull::kDropLru;
  return InvalidArgumentError(
      "--on-kv-full: expected refuse or drop-lru, got '" + std::string(text) +
      "'");
}

const char* OnKvFullName(OnKvFull policy) {
  return policy == OnKvFull::kRefuse ? "refuse" : "drop-lru";
}

Status EngineOptions::Validate() const {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("engine options: " + what);
  };
  if (n_ctx_total == 0) return bad("n_ctx_total must be >= 1");
  if (n_slots == 0) return bad("n_slots must be >= 1");
  if (page_size == 0) return bad("page_size must be >= 1");
  if (prefill_chunk == 0) return bad("prefill_chunk must be >= 1");
  if (!(prefill_step_share >= 0)) return bad("prefill_step_share must be >= 0");
  if (max_batch_tokens < n_slots) {
    return bad("max_batch_tokens (" + std::to_string(max_batch_tokens) +
               ") must be >= n_slots (" + std::to_string(n_slots) + ")");
  }
  if (ctx_per_slot > n_ctx_total) {
    return bad("ctx_per_slot " + std::to_string(ctx_per_slot) +
               " exceeds n_ctx_total " + std::to_string(n_ctx_total));
  }
  if (!spill_dir.empty() && spill_disk_bytes == 0) {
    return bad("spill_dir " + spill_dir + " needs spill_disk_bytes > 0");
  }
  if (prefix_disk_bytes > 0 && prefix_dir.empty()) {
    return bad("prefix_disk_bytes needs prefix_dir (--prefix-disk needs "
               "--spill-dir)");
  }
  const bool has_store = prefix_disk_bytes > 0 || !kv_store_url.empty();
  if (has_store && kv_policy == KvPolicy::kContiguousDefrag) {
    // The store could not load pages under it (see prefix_store.h): refuse
    // rather than write records that are never read back.
    return bad(
        std::string(prefix_disk_bytes > 0 ? "--prefix-disk" : "--kv-store") +
        " needs --kv-policy paged or contiguous; contiguous+defrag "
        "may move cells a restore has reserved");
  }
  if (!kv_store_url.empty()) {
    KV_RETURN_IF_ERROR(ParseRedisUrl(kv_store_url).status());
    if (store_mac == nullptr && !kv_store_unauthenticated) {
      return bad(
          "--kv-store needs a store key shared by the instances, "
          "--kv-store-key-file FILE or --kv-store-key-env VAR (records "
          "without its tag are refused), or --kv-store-unauthenticated to "
          "accept records that anyone who can write to the store can forge");
    }
  }
  if (kv_store_url.empty() &&
      (!kv_store_user.empty() || !kv_store_password.empty())) {
    return bad("--kv-store-user and --kv-store-password-* need --kv-store");
  }
  if (slot_io_timeout_ms == 0) return bad("slot_io_timeout_ms must be >= 1");
  return Status::Ok();
}

// --- Engine: forwards to Impl ----------------------------------------------

namespace {

// Runs `start` (a Start* call) and blocks until its reply came.
template <typename T>
StatusOr<T> Await(const std::function<Status(Reply<T>)>& start) {
  auto promise = std::make_shared<std::promise<StatusOr<T>>>();
  std::future<StatusOr<T>> future = promise->get_future();
  KV_RETURN_IF_ERROR(start([promise](StatusOr<T> result) {
    promise->set_value(std::move(result));
  }));
  return future.get();
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(
    std::unique_ptr<LlamaModel> model, const EngineOptions& options) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                      Impl::Create(std::move(model), options));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { impl_->Shutdown(); }

StatusOr<uint64_t> Engine::Submit(CompletionParams params,
                                  std::shared_ptr<CompletionSink> sink) {
  return impl_->Submit(std::move(params), std::move(sink));
}
void Engine::Cancel(uint64_t task_id) { impl_->Cancel(task_id); }
Status Engine::StartSave(uint32_t slot, std::string path,
                         Reply<SlotSaveResult> reply) {
  return impl_->PostAction(slot, NewSaveJob(impl_->target(), slot,
                                            std::move(path), std::move(reply)));
}

Status Engine::StartRestore(uint32_t slot, std::string path,
                            Reply<SlotRestoreResult> reply) {
  return impl_->PostAction(
      slot,
      NewRestoreJob(impl_->target(), slot, std::move(path), std::move(reply)));
}

Status Engine::StartErase(uint32_t slot, Reply<uint64_t> reply) {
  return impl_->PostAction(
      slot, NewEraseJob(impl_->target(), slot, std::move(reply)));
}

Status Engine::StartDefrag(Reply<DefragReport> reply) {
  return impl_->PostAction(std::nullopt,
                           NewDefragJob(impl_->target(), std::move(reply)));
}

Status Engine::StartLookup(std::vector<TokenId> tokens,
                           Reply<PrefixLookup> reply) {
  return impl_->PostAction(
      std::nullopt,
      NewLookupJob(impl_->target(), std::move(tokens), std::move(reply)));
}

StatusOr<SlotSaveResult> Engine::SaveSlot(uint32_t slot,
                                          const std::string& path) {
  return Await<SlotSaveResult>(
      [&](Reply<SlotSaveResult> r) { return StartSave(slot, path, r); });
}
StatusOr<SlotRestoreResult> Engine::RestoreSlot(uint32_t slot,
                                                const std::string& path) {
  return Await<SlotRestoreResult>(
      [&](Reply<SlotRestoreResult> r) { return StartRestore(slot, path, r); });
}
StatusOr<uint64_t> Engine::EraseSlot(uint32_t slot) {
  return Await<uint64_t>(
      [&](Reply<uint64_t> r) { return StartErase(slot, r); });
}
StatusOr<DefragReport> Engine::Defrag() {
  return Await<DefragReport>(
      [&](Reply<DefragReport> r) { return StartDefrag(r); });
}
std::vector<SlotInfo> Engine::Slots() const { return impl_->Slots(); }
EngineMetrics Engine::Metrics() const { return impl_->Metrics(); }
KvMap Engine::GetKvMap() const { return impl_->GetKvMap(); }
void Engine::Shutdown() { impl_->Shutdown(); }
const LlamaModel& Engine::model() const { return impl_->model(); }
const EngineOptions& Engine::options() const { return impl_->options(); }

// --- Impl: construction -----------------------------------------------------

Engine::Impl::Impl(std::unique_ptr<LlamaModel> model,
                   const EngineOptions& options)
    : model_(std::move(model)),
      sampler_vocab_(
          std::make_unique<TokenizerSamplerVocab>(&model_->tokenizer())),
      options_(options) {}

StatusOr<std::unique_ptr<Engine::Impl>> Engine::Impl::Create(
    std::unique_ptr<LlamaModel> model, const EngineOptions& options) {
  if (model == nullptr) return InvalidArgumentError("engine: null model");
  KV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Impl> impl(new Impl(std::move(model), options));
  KV_RETURN_IF_ERROR(impl->Init());
  return impl;
}

Status Engine::Impl::Init() {
  EngineOptions& o = options_;
  if (o.ctx_per_slot == 0) {
    o.ctx_per_slot = o.n_ctx_total;
    const uint32_t train = model_->hparams().n_ctx_train;
    if (train > 0) o.ctx_per_slot = std::min(o.ctx_per_slot, train);
  }
  const KvLayout layout = model_->KvLayoutFor(o.cache_type);
  KV_RETURN_IF_ERROR(layout.Validate().WithContext("engine: KV cache type"));
  KvCacheOptions cache_options;
  cache_options.page_size = o.page_size;
  cache_options.num_pages = PagesForCells(o.n_ctx_total, o.page_size);
  cache_options.policy = o.kv_policy;
  cache_options.layout = layout;
  KV_ASSIGN_OR_RETURN(cache_, KvCache::Create(cache_options));
  KvVaultOptions vault_options;
  vault_options.env = o.env;
  vault_options.fingerprint = model_->fingerprint();
  vault_options.ram_budget_bytes = o.spill_ram_bytes;
  vault_options.disk_dir = o.spill_dir;
  vault_options.disk_budget_bytes = o.spill_disk_bytes;
  vault_options.save.sync = o.sync_saves;
  vault_options.allow_drops = o.on_kv_full == OnKvFull::kDropLru;
  KV_ASSIGN_OR_RETURN(vault_, KvVault::Create(cache_.get(), vault_options));
  KV_ASSIGN_OR_RETURN(prefix_store_, OpenPrefixStore(o, *model_, layout));
  if (!o.kv_store_url.empty()) {
    KV_ASSIGN_OR_RETURN(RedisEndpoint endpoint, StoreEndpoint(o));
    slot_mirror_ = std::make_unique<SlotFileMirror>(
        endpoint, model_->fingerprint(),
        o.env != nullptr ? o.env : Env::Default(), o.store_mac);
  }
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.num_threads;
  if (compute.num_threads == 0) {
    compute.num_threads = std::max(1u, std::thread::hardware_concurrency());
  }
  context_ =
      std::make_unique<InferenceContext>(model_.get(), cache_.get(), compute);
  slot_kv_ = std::make_unique<VaultSlotKv>(vault_.get(), cache_.get(),
                                           prefix_store_.get());
  forward_ =
      std::make_unique<ModelForwardPass>(context_.get(), model_->n_vocab());
  scheduler_ = std::make_unique<Scheduler>(
      MakeSchedulerOptions(o, model_->hparams()), slot_kv_.get(),
      forward_.get(), &model_->tokenizer(), sampler_vocab_.get());
  RecoverSpilledSlots(*vault_, *cache_, *scheduler_);
  {
    MutexLock lock(&mu_);
    published_ =
        BuildEngineSnapshot(*scheduler_, *vault_, *cache_,
                            prefix_store_.get(), o.ctx_per_slot);
  }
  // A slot has at most one action at a time, so one thread per slot means
  // no slot's file I/O ever waits for another's (a save's fsync on a busy
  // disk can take seconds); past 8 the disk, not the queue, is the limit.
  io_ = std::make_unique<IoPool>(
      [this](uint64_t id, Status status) { OnIoDone(id, std::move(status)); },
      std::clamp<size_t>(o.n_slots, 1, 8));
  scheduler_thread_ = std::thread([this] { SchedulerLoop(); });
  return Status::Ok();
}

Engine::Impl::~Impl() { Shutdown(); }

void Engine::Impl::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (scheduler_thread_.joinable()) scheduler_thread_.join();
}

// --- Impl: the public API ----------------------------------------------------

StatusOr<uint64_t> Engine::Impl::Post(
    std::function<Work(uint64_t task_id)> make) {
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_) return UnavailableError("engine is shut down");
    id = next_task_id_++;
    inbox_.work.push_back(make(id));
    wake_ = true;
  }
  cv_.SignalAll();
  return id;
}

StatusOr<uint64_t> Engine::Impl::Submit(CompletionParams params,
                                        std::shared_ptr<CompletionSink> sink) {
  if (sink == nullptr) return InvalidArgumentError("Submit: null sink");
  KV_RETURN_IF_ERROR(ValidateParams(params, options_,
                                    static_cast<TokenId>(model_->n_vocab())));
  return Post([&](uint64_t id) -> Work {
    return CompletionWork{id, std::move(params), std::move(sink)};
  });
}

void Engine::Impl::Cancel(uint64_t task_id) {
  {
    MutexLock lock(&mu_);
    inbox_.cancels.insert(task_id);
    wake_ = true;
  }
  cv_.SignalAll();
}

Status Engine::Impl::PostAction(std::optional<uint32_t> slot,
                                std::unique_ptr<SlotJob> job) {
  if (slot) KV_RETURN_IF_ERROR(CheckSlot(*slot, options_.n_slots));
  return Post([&](uint64_t id) -> Work {
           return SlotActionWork{id, slot, std::move(job)};
         })
      .status();
}

std::vector<SlotInfo> Engine::Impl::Slots() const {
  MutexLock lock(&mu_);
  return published_.slots;
}

EngineMetrics Engine::Impl::Metrics() const {
  MutexLock lock(&mu_);
  EngineMetrics metrics = published_.metrics;
  if (slot_mirror_ != nullptr) metrics.slot_mirror = slot_mirror_->Stats();
  for (const Work& work : inbox_.work) {
    if (std::holds_alternative<CompletionWork>(work)) {
      ++metrics.requests_deferred;
    }
  }
  return metrics;
}

KvMap Engine::Impl::GetKvMap() const {
  MutexLock lock(&mu_);
  return published_.map;
}

}  // namespace kvault
