// Engine: the slots of a server over one model and one shared paged KV pool,
// run by a single scheduler thread with continuous batching.
//
// Every step the scheduler builds one forward batch holding one decode token
// for every generating slot plus a chunk of at most `prefill_chunk` prompt
// tokens of slots still prefilling (so a long prompt never freezes the
// others), decodes it, samples each slot's next token and streams it to the
// request's sink. A slot keeps its KV after a request (prefix reuse with
// cache_prompt); idle slots are spilled to the KvVault's tiers when room is
// needed, never silently dropped, and brought back on their next use. When
// generating slots together outgrow the pool, the youngest request is
// preempted (spilled) and resumed later instead of failing.
//
// Slot save/restore/erase are queued like requests and run when the slot is
// not processing; the file I/O runs on an I/O thread so other slots keep
// generating (see docs/architecture.md, "slot actions"). Exceptions, done
// on the scheduler thread between steps: every action under the
// contiguous+defrag policy (its appends may move any cell), the save of a
// spilled slot (a copy of its tier entry), erase and defrag.
//
// Thread-safety: every public method may be called from any thread (the
// HTTP server's). Sinks are called on the scheduler thread.
#ifndef KVAULT_ENGINE_ENGINE_H_
#define KVAULT_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/record_mac.h"
#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/kv_dtype.h"
#include "kv/kv_policy.h"
#include "kv/kv_types.h"
#include "kv/kv_vault.h"
#include "kv/prefix_store.h"
#include "kv/slot_file_mirror.h"
#include "model/compute_backend.h"
#include "model/llama_model.h"
#include "model/sampler.h"

namespace kvault {

// What the engine does when a step or a restore needs pages, the pool is
// full and no spill tier can take an idle slot's KV.
enum class OnKvFull {
  // The request that needs room fails with 503 reason "kv_full"; no idle
  // slot loses its KV.
  kRefuse,
  // The least recently used idle slot's KV is dropped (counted in
  // EngineMetrics::kv_dropped*, marked on the slot's SlotInfo).
  kDropLru,
};

// Parses "refuse" / "drop-lru"; InvalidArgument naming the choices.
StatusOr<OnKvFull> ParseOnKvFull(std::string_view text);
// Returns "refuse" / "drop-lru".
const char* OnKvFullName(OnKvFull policy);

struct EngineOptions {
  uint32_t n_ctx_total = 4096;  // cells in the shared pool (-c)
  uint32_t n_slots = 1;         // -np
  // Most cells one slot may hold (--ctx-per-slot); 0: min(n_ctx_total,
  // the model's context length).
  uint32_t ctx_per_slot = 0;
  uint32_t page_size = 16;
  KvDtype cache_type = KvDtype::kF16;
  KvPolicy kv_policy = KvPolicy::kPaged;  // --kv-policy (ParseKvPolicy)
  uint64_t spill_ram_bytes = 0;           // 0: no RAM tier
  std::string spill_dir;                  // empty: no disk tier
  uint64_t spill_disk_bytes = 0;
  // The persistent prefix store (--prefix-disk): page records of finished
  // requests in this directory, within this budget; 0 bytes: none.
  std::string prefix_dir;
  uint64_t prefix_disk_bytes = 0;
  // The shared remote tier of the prefix store (--kv-store
  // redis://HOST:PORT[/DB]); empty: none.
  std::string kv_store_url;
  // The store key (--kv-store-key-file / --kv-store-key-env): page records
  // (every tier's) and mirrored slot files carry HMAC tags under it, and
  // ones without a right tag are refused. Null: untagged, which a
  // kv_store_url accepts only with kv_store_unauthenticated
  // (--kv-store-unauthenticated: anyone who can write to the store can
  // then change outputs).
  std::shared_ptr<const RecordMac> store_mac;
  bool kv_store_unauthenticated = false;
  // Redis AUTH (--kv-store-user, --kv-store-password-file / -env): sent on
  // every connection when the password is set ("default" user if none).
  std::string kv_store_user;
  std::string kv_store_password;
  uint32_t num_threads = 0;        // forward-pass threads; 0: all cores
  // The forward pass's kernel set and numerics (the apps take them from
  // ComputeBackendOptions::FromEnvironment); num_threads replaces its
  // thread count.
  ComputeBackendOptions compute;
  uint32_t prefill_chunk = 256;    // prompt tokens per slot per step
  uint32_t max_batch_tokens = 512; // tokens per forward call
  // While other slots generate, the prompt tokens a step carries are
  // bounded so its prefill takes at most this fraction of a step without
  // prefill (measured; prefill_pacer.h): the others' inter-token latency
  // stays near (1 + share) x. 0: always prefill_chunk tokens.
  double prefill_step_share = 0.4;
  // A generating slot whose context is full discards half of what follows
  // the kept prompt start and goes on (llama-server's --context-shift)
  // instead of stopping.
  bool context_shift = false;
  bool sync_saves = true;          // fsync slot files (spills never)
  // A request may reuse the prompt prefix any slot holds (whole pages,
  // shared copy-on-write), not only its own slot's (--no-prefix-cache).
  bool prefix_cache = true;
  // SchedulerOptions::cache_idle_slots (--cache-idle-slots).
  bool cache_idle_slots = false;
  OnKvFull on_kv_full = OnKvFull::kRefuse;
  // A slot save/restore whose file I/O (on the I/O threads) takes longer
  // fails with Unavailable, reason io_timeout; the scheduler never waits.
  uint32_t slot_io_timeout_ms = 30000;
  // Reads and writes slot files and the disk tier; null: Env::Default().
  // Not owned; must outlive the engine.
  Env* env = nullptr;
  // Returns OK or InvalidArgument naming the bad field.
  Status Validate() const;
};

// One completion request, already tokenized by the server.
struct CompletionParams {
  std::vector<TokenId> prompt;  // BOS included when the model wants one
  int32_t n_predict = -1;       // < 0: until end of generation or context
  SamplingParams sampling;
  std::vector<std::string> stop;   // stop strings (not included in output)
  std::optional<uint32_t> slot;    // id_slot; nullopt: choose one
  bool cache_prompt = true;        // reuse the slot's common prefix
  uint32_t n_probs = 0;            // top tokens with probabilities per step
  // n_probs reports the probabilities the sampler chain left (llama-server's
  // post_sampling_probs) instead of the model's log-softmax.
  bool post_sampling_probs = false;
  bool ignore_eos = false;
  // The sink's OnPromptProgress hears of the prompt's evaluation: once
  // before it starts, then after every batch (llama-server's
  // return_progress).
  bool return_progress = false;
  // Context shift (EngineOptions::context_shift): the tokens after BOS
  // that are never discarded (< 0: the whole prompt), and how many to
  // discard each time (0: half of the rest).
  int32_t n_keep = 0;
  int32_t n_discard = 0;
};

struct CompletionTimings {
  uint64_t prompt_n = 0;  // prompt tokens evaluated (cached ones excluded)
  double prompt_ms = 0;
  uint64_t predicted_n = 0;
  double predicted_ms = 0;
  uint64_t cache_n = 0;  // prompt tokens reused from the slot's cache
};

// How far a request's prompt evaluation has come.
struct PromptProgress {
  uint32_t slot = 0;       // the slot evaluating it
  uint64_t total = 0;      // prompt tokens
  uint64_t cache = 0;      // of them reused from the slot's cache
  uint64_t processed = 0;  // cache included: total once evaluated
  double time_ms = 0;      // since the request started
  CompletionTimings timings;  // so far (prompt_n = processed - cache)
};

// One generated token as streamed.
struct TokenEvent {
  TokenId token = 0;
  uint32_t slot = 0;  // the slot that generated it
  // Text released with this token: empty while a UTF-8 sequence is
  // incomplete or the tail could still become a stop string.
  std::string text;
  std::vector<TokenLogprob> probs;  // n_probs entries (log-softmax)
  // With n_probs and without post_sampling_probs: this token's own
  // log-softmax, whether or not it is among `probs`.
  float logprob = 0;
  // With post_sampling_probs: the candidates the chain left (at most
  // n_probs, none of probability 0) and the chosen token's probability;
  // `probs` stays empty.
  bool post_sampling = false;
  std::vector<TokenProb> post_probs;
  float chosen_prob = 0;
  CompletionTimings timings;  // the request's so far, this token included
};

struct CompletionResult {
  uint32_t slot = 0;
  std::string content;           // generated text, stop string excluded
  std::vector<TokenId> tokens;   // generated tokens, EOG excluded
  std::string stop_type;         // "eos" | "limit" | "word" | "none"
  std::string stopping_word;     // the stop string that matched, if any
  uint64_t tokens_predicted = 0;
  uint64_t tokens_evaluated = 0;  // prompt tokens (cached included)
  uint64_t tokens_cached = 0;     // tokens in the slot's KV at the end
  bool truncated = false;         // stopped by the slot's context limit
  CompletionTimings timings;
  // The end of `content` that no TokenEvent carried: text held back (a
  // possible stop-string start, an incomplete UTF-8 character) when
  // generation ended at an end-of-generation token. A streaming client
  // sends it last.
  std::string final_text;
};

// Receives one request's output on the scheduler thread; must not block
// (Submit and Cancel may be called from it; SaveSlot, RestoreSlot,
// EraseSlot and Defrag must not: they wait for the scheduler).
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  // Called once, first: the request was admitted into `slot`.
  virtual void OnStart(uint32_t slot) {}
  // Called for each generated token; returning false cancels the request
  // (e.g. the client went away) and frees its slot.
  virtual bool OnToken(const TokenEvent& event) = 0;
  // Called, when the request asked for return_progress, before the prompt
  // is evaluated and after each batch of it.
  virtual void OnPromptProgress(const PromptProgress& progress) {}
  // Called exactly once, last: the result, or the error that ended it
  // (Cancelled, reason kReasonCancelled, after a cancel).
  virtual void OnDone(const StatusOr<CompletionResult>& result) = 0;
};

struct SlotSaveResult {
  uint32_t slot = 0;
  uint64_t n_saved = 0;    // tokens
  uint64_t n_written = 0;  // bytes
  double save_ms = 0;
};

struct SlotRestoreResult {
  uint32_t slot = 0;
  uint64_t n_restored = 0;  // tokens
  uint64_t n_read = 0;      // bytes
  double restore_ms = 0;
  std::vector<Eviction> evicted;  // idle sequences spilled to make room
};

struct SlotInfo {
  uint32_t id = 0;
  uint32_t n_ctx = 0;  // the most cells this slot may hold
  bool is_processing = false;
  // "idle" | "prefill" | "generating" | "io" | "spilled" (its KV is in a
  // tier: an idle slot, or a preempted request waiting for room).
  std::string state;
  uint64_t n_cached = 0;  // tokens whose KV the slot holds (resident or not)
  bool spilled = false;
  std::optional<uint64_t> id_task;     // running request, if any
  std::optional<SamplingParams> params;  // of the running/last request
  int32_t n_predict = -1;
  uint64_t n_decoded = 0;  // tokens generated by the running/last request
  // The tokens of KV the on-kv-full drop-lru policy dropped from this slot
  // since it last held KV (0: nothing dropped).
  uint64_t n_kv_dropped = 0;
};

struct EngineMetrics {
  uint64_t requests_total = 0;
  uint64_t requests_failed = 0;
  uint64_t requests_processing = 0;
  uint64_t requests_deferred = 0;  // waiting for a slot
  uint64_t prompt_tokens_total = 0;  // decoded, cache hits excluded
  uint64_t prompt_tokens_cached_total = 0;  // reused from a slot's cache
  // Of those, reused from another slot's cache (pages shared, not copied),
  // and loaded from the persistent prefix store.
  uint64_t prompt_tokens_shared_total = 0;
  uint64_t prompt_tokens_from_store_total = 0;
  double prompt_seconds_total = 0;
  uint64_t tokens_predicted_total = 0;
  double predicted_seconds_total = 0;
  uint64_t preemptions = 0;
  // Preempted requests whose KV could not be spilled (no tier, too big):
  // dropped and recomputed on resume.
  uint64_t preemptions_recomputed = 0;
  // Idle slots whose KV could not be spilled and was dropped for room
  // (on-kv-full drop-lru only), and the tokens they held.
  uint64_t idle_kv_discards = 0;
  uint64_t idle_kv_discarded_tokens = 0;
  // Requests and slot actions refused because the pool was full
  // (on-kv-full refuse): 503 kv_full.
  uint64_t kv_full_refusals = 0;
  // Slot saves/restores whose I/O timed out, and how many of those are
  // still stuck in the filesystem.
  uint64_t io_timeouts = 0;
  uint64_t io_stuck = 0;
  uint64_t forward_calls = 0;
  // The slots taking part, summed over forward calls (divided by
  // forward_calls: the average batch width in sequences).
  uint64_t busy_slot_steps = 0;
  uint64_t n_tokens_max = 0;  // longest finished sequence (prompt + output)
  PoolStats pool;  // sequences omitted
  VaultStats vault;
  std::optional<PrefixStoreStats> prefix_store;  // when there is one
  std::optional<SlotFileMirrorStats> slot_mirror;  // with --kv-store
  uint64_t restores_ok = 0;            // slot restores by result
  uint64_t restores_not_found = 0;
  uint64_t restores_corrupt = 0;
  uint64_t restores_mismatch = 0;
  uint64_t restores_no_room = 0;
  uint64_t restores_other_error = 0;
  uint64_t saves_ok = 0;
  uint64_t saves_failed = 0;
};

// The pool seen page by page, for GET /kv.
struct KvMap {
  PoolStats stats;  // sequences omitted
  uint32_t page_size = 0;
  // For each page, the slot whose sequence holds it (the lowest slot when
  // shared); nullopt for a free page.
  std::vector<std::optional<uint32_t>> page_slot;
  // For each page, whether more than one slot's sequence holds it (a
  // shared prompt prefix).
  std::vector<bool> page_shared;
};

// How much of a prompt an instance holds (GET /kv/lookup), for routers
// that send a request where its prefix is.
struct PrefixLookup {
  uint64_t num_tokens = 0;   // the prompt's
  uint64_t pool_tokens = 0;  // leading tokens a slot's KV holds in the pool
  std::optional<uint32_t> pool_slot;  // that slot (none when 0 tokens)
  // Per prefix-store tier, nearest first: its name and the leading tokens
  // it holds in whole pages.
  std::vector<std::pair<std::string, uint64_t>> store_tokens;
};

// Receives a slot action's result (Engine::Start*).
template <typename T>
using Reply = std::function<void(StatusOr<T>)>;

class Engine {
 public:
  // Builds the pool (n_ctx_total cells of `options.cache_type`), the vault
  // and the slots, and starts the scheduler and I/O threads.
  // InvalidArgument for bad options (e.g. a Q8_0 cache the model's head
  // size does not allow).
  static StatusOr<std::unique_ptr<Engine>> Create(
      std::unique_ptr<LlamaModel> model, const EngineOptions& options);
  // Stops the threads: queued requests and slot actions end with
  // Cancelled, running ones are cancelled; spill tiers are flushed.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a completion; returns its task id. `sink` gets the tokens and
  // the result. Errors at once (sink not called): InvalidArgument for an
  // empty prompt (reason "empty_prompt"), a token id out of range
  // ("invalid_token"), a prompt longer than the slot's context
  // ("prompt_too_long"), an out-of-range slot ("slot_out_of_range") or
  // invalid sampling; Unavailable after Shutdown.
  StatusOr<uint64_t> Submit(CompletionParams params,
                            std::shared_ptr<CompletionSink> sink);
  // Cancels a queued or running task (no-op when it already ended).
  void Cancel(uint64_t task_id);

  // Slot actions. Each Start* queues the action and returns at once;
  // `reply` receives the result exactly once, on the scheduler or an I/O
  // thread (it must not block), Cancelled when the engine stops first.
  // Errors that keep the action from being queued are returned instead and
  // `reply` is never called: InvalidArgument reason "slot_out_of_range",
  // Unavailable after Shutdown. The blocking forms queue and wait.
  //
  // Saves slot `slot`'s KV (tokens and K/V) to `path` atomically, once the
  // slot is not processing. FailedPrecondition reason "slot_empty" when the
  // slot holds no tokens.
  Status StartSave(uint32_t slot, std::string path,
                   Reply<SlotSaveResult> reply);
  // Restores the state file at `path` into slot `slot` (once it is not
  // processing), spilling idle slots when the pool is short. On any error
  // the slot is as it was. NotFound (reason "file_not_found") for a missing
  // file; the state-file errors keep their reasons (truncated,
  // checksum_mismatch, model_mismatch, ...); ResourceExhausted (reason
  // "no_room") when it cannot fit even after eviction.
  Status StartRestore(uint32_t slot, std::string path,
                      Reply<SlotRestoreResult> reply);
  // Drops slot `slot`'s KV (resident or spilled); replies the tokens erased.
  Status StartErase(uint32_t slot, Reply<uint64_t> reply);
  // Runs the defragmenter (at a quiet moment between steps).
  Status StartDefrag(Reply<DefragReport> reply);
  // Looks up how much of `tokens` the pool and the prefix store hold.
  Status StartLookup(std::vector<TokenId> tokens, Reply<PrefixLookup> reply);
  // Blocking StartSave.
  StatusOr<SlotSaveResult> SaveSlot(uint32_t slot, const std::string& path);
  // Blocking StartRestore.
  StatusOr<SlotRestoreResult> RestoreSlot(uint32_t slot,
                                          const std::string& path);
  // Blocking StartErase.
  StatusOr<uint64_t> EraseSlot(uint32_t slot);
  // Blocking StartDefrag.
  StatusOr<DefragReport> Defrag();

  // Returns a snapshot of every slot.
  std::vector<SlotInfo> Slots() const;
  // Returns counters and pool/vault statistics.
  EngineMetrics Metrics() const;
  // Returns the page occupancy map.
  KvMap GetKvMap() const;

  // Stops accepting work, cancels queued and running requests, flushes the
  // tiers and joins the threads. Idempotent; the destructor calls it.
  void Shutdown();

  // Returns the model.
  const LlamaModel& model() const;
  // Returns the options in effect (ctx_per_slot resolved).
  const EngineOptions& options() const;

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_ENGINE_H_
