// Engine: options, construction, the public API, the scheduler thread's
// loop and the snapshots readers see.
#include "engine/engine.h"

#include <algorithm>
#include <future>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {

Status CancelledStatus(const std::string& what) {
  return CancelledError(what + " cancelled").WithReason(kReasonCancelled);
}

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
  if (kv_policy != "paged" && kv_policy != "contiguous" &&
      kv_policy != "contiguous+defrag") {
    return bad("kv_policy \"" + kv_policy +
               "\" (expected paged, contiguous or contiguous+defrag)");
  }
  if (!spill_dir.empty() && spill_disk_bytes == 0) {
    return bad("spill_dir " + spill_dir + " needs spill_disk_bytes > 0");
  }
  if (slot_io_timeout_ms == 0) return bad("slot_io_timeout_ms must be >= 1");
  return Status::Ok();
}

// --- Engine: forwards to Impl ----------------------------------------------

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
StatusOr<SlotSaveResult> Engine::SaveSlot(uint32_t slot,
                                          const std::string& path) {
  return impl_->SaveSlot(slot, path);
}
StatusOr<SlotRestoreResult> Engine::RestoreSlot(uint32_t slot,
                                                const std::string& path) {
  return impl_->RestoreSlot(slot, path);
}
StatusOr<uint64_t> Engine::EraseSlot(uint32_t slot) {
  return impl_->EraseSlot(slot);
}
StatusOr<DefragReport> Engine::Defrag() { return impl_->Defrag(); }
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
  const LlamaHparams& h = model_->hparams();
  const uint64_t q_width = uint64_t{h.n_head} * h.n_embd_head_k;
  const uint64_t weights_per_layer =
      uint64_t{h.n_embd} * (q_width + 2 * uint64_t{h.n_embd_k_gqa()}) +
      uint64_t{h.n_head} * h.n_embd_head_v * h.n_embd +
      3 * uint64_t{h.n_embd} * h.n_ff;
  pacer_ = PrefillPacer(o.prefill_step_share,
                        TokenCellsForShape(weights_per_layer, h.n_head,
                                           h.n_embd_head_k, h.n_embd_head_v));
  const KvLayout layout = model_->KvLayoutFor(o.cache_type);
  KV_RETURN_IF_ERROR(layout.Validate().WithContext("engine: KV cache type"));
  KvCacheOptions cache_options;
  cache_options.page_size = o.page_size;
  cache_options.num_pages = (o.n_ctx_total + o.page_size - 1) / o.page_size;
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
  ComputeBackendOptions compute = o.compute;
  compute.num_threads = o.num_threads;
  if (compute.num_threads == 0) {
    compute.num_threads = std::max(1u, std::thread::hardware_concurrency());
  }
  context_ =
      std::make_unique<InferenceContext>(model_.get(), cache_.get(), compute);
  for (uint32_t i = 0; i < o.n_slots; ++i) slots_.emplace_back(i);
  RecoverSpilledSlots();
  published_ = BuildSnapshot();
  io_threads_.emplace_back([this] { IoLoop(); });
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  return Status::Ok();
}

Engine::Impl::~Impl() { Shutdown(); }

void Engine::Impl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
}

// --- Impl: the public API ----------------------------------------------------

Status Engine::Impl::CheckSlot(uint32_t slot) const {
  if (slot < options_.n_slots) return Status::Ok();
  return InvalidArgumentError("slot " + std::to_string(slot) +
                              " out of range [0, " +
                              std::to_string(options_.n_slots) + ")")
      .WithReason("slot_out_of_range");
}

Status Engine::Impl::ValidateParams(const CompletionParams& params) const {
  if (params.slot) KV_RETURN_IF_ERROR(CheckSlot(*params.slot));
  if (params.prompt.empty()) {
    return InvalidArgumentError("empty prompt").WithReason("empty_prompt");
  }
  if (params.prompt.size() > options_.ctx_per_slot) {
    return InvalidArgumentError(
               "prompt of " + std::to_string(params.prompt.size()) +
               " tokens exceeds the slot context of " +
               std::to_string(options_.ctx_per_slot))
        .WithReason("prompt_too_long");
  }
  const TokenId n_vocab = static_cast<TokenId>(model_->n_vocab());
  for (size_t i = 0; i < params.prompt.size(); ++i) {
    const TokenId t = params.prompt[i];
    if (t < 0 || t >= n_vocab) {
      return InvalidArgumentError("prompt token " + std::to_string(i) + " = " +
                                  std::to_string(t) + " out of range [0, " +
                                  std::to_string(n_vocab) + ")")
          .WithReason("invalid_token");
    }
  }
  return params.sampling.Validate();
}

StatusOr<uint64_t> Engine::Impl::Submit(CompletionParams params,
                                        std::shared_ptr<CompletionSink> sink) {
  if (sink == nullptr) return InvalidArgumentError("Submit: null sink");
  KV_RETURN_IF_ERROR(ValidateParams(params));
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("engine is shut down");
    id = next_task_id_++;
    WorkItem item;
    item.task_id = id;
    item.slot = params.slot;
    item.params = std::move(params);
    item.sink = std::move(sink);
    queue_.push_back(std::move(item));
    wake_ = true;
  }
  cv_.notify_all();
  return id;
}

void Engine::Impl::Cancel(uint64_t task_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.insert(task_id);
    wake_ = true;
  }
  cv_.notify_all();
}

template <typename T>
StatusOr<T> Engine::Impl::RunAction(std::optional<uint32_t> slot,
                                    std::function<void(Slot*, Reply<T>)> fn) {
  auto promise = std::make_shared<std::promise<StatusOr<T>>>();
  std::future<StatusOr<T>> future = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("engine is shut down");
    WorkItem item;
    item.task_id = next_task_id_++;
    item.slot = slot;
    item.is_action = true;
    item.run = [this, promise, fn](Slot* s) {
      fn(s, [this, promise](StatusOr<T> result) {
        auto shared = std::make_shared<StatusOr<T>>(std::move(result));
        deferred_.push_back(
            [promise, shared] { promise->set_value(std::move(*shared)); });
      });
    };
    item.fail = [promise](const Status& status) {
      promise->set_value(status);
    };
    queue_.push_back(std::move(item));
    wake_ = true;
  }
  cv_.notify_all();
  return future.get();
}

template <typename T>
StatusOr<T> Engine::Impl::RunSyncAction(
    std::optional<uint32_t> slot, std::function<StatusOr<T>(Slot*)> fn) {
  return RunAction<T>(slot, [fn](Slot* s, Reply<T> reply) { reply(fn(s)); });
}

StatusOr<SlotSaveResult> Engine::Impl::SaveSlot(uint32_t slot,
                                                const std::string& path) {
  KV_RETURN_IF_ERROR(CheckSlot(slot));
  return RunAction<SlotSaveResult>(
      slot, [this, path](Slot* s, Reply<SlotSaveResult> reply) {
        StartSave(*s, path, std::move(reply));
      });
}

StatusOr<SlotRestoreResult> Engine::Impl::RestoreSlot(
    uint32_t slot, const std::string& path) {
  KV_RETURN_IF_ERROR(CheckSlot(slot));
  return RunAction<SlotRestoreResult>(
      slot, [this, path](Slot* s, Reply<SlotRestoreResult> reply) {
        StartRestore(*s, path, std::move(reply));
      });
}

StatusOr<uint64_t> Engine::Impl::EraseSlot(uint32_t slot) {
  KV_RETURN_IF_ERROR(CheckSlot(slot));
  return RunSyncAction<uint64_t>(slot,
                                 [this](Slot* s) { return DoErase(*s); });
}

StatusOr<DefragReport> Engine::Impl::Defrag() {
  return RunSyncAction<DefragReport>(std::nullopt,
                                     [this](Slot*) { return DoDefrag(); });
}

std::vector<SlotInfo> Engine::Impl::Slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_.slots;
}

EngineMetrics Engine::Impl::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineMetrics metrics = published_.metrics;
  metrics.requests_deferred = 0;
  for (const WorkItem& item : queue_) {
    if (!item.is_action) ++metrics.requests_deferred;
  }
  return metrics;
}

KvMap Engine::Impl::GetKvMap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_.map;
}

}  // namespace kvault
