// Engine::Impl: the state behind Engine, shared by engine.cc (construction,
// public API), engine_loop.cc (threads, shutdown, snapshots), scheduler.cc
// (admission and one step of continuous batching), pool_pressure.cc (room
// in the pool, preemption), generation.cc (sampling, stops, results) and
// slot_actions.cc (save/restore/erase/defrag).
//
// Threading: the scheduler thread alone touches the slots, the KvCache, the
// KvVault and the InferenceContext. mu_ guards only the queue, the cancel
// requests, the stop flag and the published snapshot, which readers
// (Slots, Metrics, GetKvMap) copy; the scheduler publishes after every step
// and before it delivers results, so a caller that saw OnDone or a slot
// action's result reads statistics at least that fresh.
#ifndef KVAULT_ENGINE_ENGINE_IMPL_H_
#define KVAULT_ENGINE_ENGINE_IMPL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/prefill_pacer.h"
#include "engine/slot.h"
#include "model/inference.h"
#include "model/sampler_vocab.h"

namespace kvault {


class Engine::Impl {
 public:
  // Builds everything and starts the scheduler thread.
  static StatusOr<std::unique_ptr<Impl>> Create(
      std::unique_ptr<LlamaModel> model, const EngineOptions& options);
  ~Impl();

  // The public API, as documented in engine.h.
  StatusOr<uint64_t> Submit(CompletionParams params,
                            std::shared_ptr<CompletionSink> sink);
  void Cancel(uint64_t task_id);
  StatusOr<SlotSaveResult> SaveSlot(uint32_t slot, const std::string& path);
  StatusOr<SlotRestoreResult> RestoreSlot(uint32_t slot,
                                          const std::string& path);
  StatusOr<uint64_t> EraseSlot(uint32_t slot);
  StatusOr<DefragReport> Defrag();
  std::vector<SlotInfo> Slots() const;
  EngineMetrics Metrics() const;
  KvMap GetKvMap() const;
  void Shutdown();
  const LlamaModel& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }

 private:
  // A queued completion or slot action.
  struct WorkItem {
    uint64_t task_id = 0;          // completions and actions alike
    std::optional<uint32_t> slot;  // nullopt: any idle slot / no slot
    bool is_action = false;
    CompletionParams params;  // completions
    std::shared_ptr<CompletionSink> sink;
    // Actions: runs on the scheduler thread once the slot (if any) is
    // idle and replies then or, after I/O, later; `fail` ends the action
    // without running it (shutdown).
    std::function<void(Slot*)> run;
    std::function<void(const Status&)> fail;
  };
  // File I/O of a slot action: `io` runs on an I/O thread, then `finish`
  // on the scheduler thread with io's status. When `io` outruns the
  // deadline, `on_timeout` runs on the scheduler thread instead (it answers
  // the caller with io_timeout), and `late` replaces `finish` once `io`
  // returns (it releases what the I/O was still using).
  struct IoOp {
    std::function<Status()> io;
    std::function<void(const Status&)> finish;
    std::function<void()> on_timeout;
    std::function<void(const Status&)> late;
    uint64_t id = 0;  // set by StartIo
  };
  // An IoOp in flight, as the scheduler tracks its deadline.
  struct IoDeadline {
    std::chrono::steady_clock::time_point at;
    std::function<void()> on_timeout;
    bool timed_out = false;
  };
  // Hands an action's result to its caller (scheduler thread; delivered
  // after the next publish).
  template <typename T>
  using Reply = std::function<void(StatusOr<T>)>;
  // A batch entry: `num_tokens` of the slot's to_feed.
  struct Part {
    Slot* slot = nullptr;
    size_t num_tokens = 0;
    bool want_logits = false;
  };
  // What readers see; rebuilt by the scheduler.
  struct Snapshot {
    std::vector<SlotInfo> slots;
    EngineMetrics metrics;  // pool and vault included
    KvMap map;
  };

  Impl(std::unique_ptr<LlamaModel> model, const EngineOptions& options);
  Status Init();

  // --- engine.cc, engine_loop.cc: queue, threads, snapshots ----------------
  // Queues an action and blocks until the scheduler ran it.
  template <typename T>
  StatusOr<T> RunAction(std::optional<uint32_t> slot,
                        std::function<void(Slot*, Reply<T>)> fn);
  // Like RunAction for work that finishes on the scheduler thread at once.
  template <typename T>
  StatusOr<T> RunSyncAction(std::optional<uint32_t> slot,
                            std::function<StatusOr<T>(Slot*)> fn);
  // InvalidArgument (reason slot_out_of_range) for a bad slot index.
  Status CheckSlot(uint32_t slot) const;
  // The checks Submit makes before queueing.
  Status ValidateParams(const CompletionParams& params) const;
  // The scheduler thread: waits for work, admits it, steps, publishes.
  void SchedulerLoop();
  // Runs the finish halves of the I/O operations that completed.
  void FinishCompletedIo(std::vector<std::pair<IoOp, Status>> done);
  // The I/O thread: runs queued IoOps in order.
  void IoLoop();
  // Queues `op` for the I/O threads with the slot I/O deadline.
  void StartIo(IoOp op);
  // Unavailable (io_timeout) when so many timed-out operations are still
  // stuck in the filesystem that no new slot I/O should start.
  Status CheckIoCapacity(const std::string& where);
  // Returns the earliest deadline of an I/O operation not yet timed out.
  std::optional<std::chrono::steady_clock::time_point> NextIoDeadline() const;
  // Times out the operations past their deadline (scheduler thread); each
  // leaves an I/O thread stuck, so a fresh one takes the queue.
  void ExpireIo();
  // Ends every queued item and running request with Cancelled.
  void CancelEverything();
  // Rebuilds the snapshot, then runs the deferred sink calls.
  void PublishAndDeliver();
  // Returns what readers see now (scheduler thread).
  Snapshot BuildSnapshot() const;
  // Returns the page -> slot map (restores in flight: their target slot).
  KvMap BuildKvMap() const;

  // --- scheduler.cc: one step ----------------------------------------------
  // Returns true when the scheduler has something to do without new input.
  bool HasRunnableWork() const;
  // Ends the queued and running requests with these ids (Cancelled).
  void ProcessCancels(const std::set<uint64_t>& task_ids);
  // Takes the queued items that can start now, in queue order.
  std::vector<WorkItem> TakeRunnable();
  // Returns the idle slot (not in `blocked`) sharing the longest prefix
  // with the prompt, else the least recently used; nullopt when none.
  std::optional<uint32_t> ChooseSlot(const CompletionParams& params,
                                     const std::set<uint32_t>& blocked) const;
  // Makes the slot run `item`'s completion.
  void StartRequest(Slot& slot, WorkItem item);
  // True when the slot's spilled KV, which the prompt would reuse, cannot
  // come back now but another slot's running request will leave room when
  // it ends: the request then waits in the queue instead of recomputing.
  bool MustWaitForRoom(const Slot& slot, const CompletionParams& params);
  // Keeps the slot's cached prefix the prompt can reuse; returns its length.
  size_t ReusePrefix(Slot& slot, const CompletionParams& params);
  // Builds, makes room for, decodes and samples one batch.
  void Step();
  // Returns this step's batch: one decode token per generating slot, then
  // prompt chunks, oldest request first, within max_batch_tokens.
  std::vector<Part> PlanBatch();
  // Returns the plan's prefill work in pacer units; *had_decode: whether
  // it also decodes (a slot's last prompt token counts as decoding).
  double PrefillUnits(const std::vector<Part>& plan, bool* had_decode) const;
  // With context shift on, discards part of the slot's context (after its
  // kept start) so generation can go on; false when it may not or cannot.
  bool ShiftContext(Slot& slot);
  // Tells the request's sink how far its prompt evaluation has come, when
  // it asked (return_progress).
  void ReportPromptProgress(const Slot& slot) const;
  // Returns the request's timings so far.
  static CompletionTimings LiveTimings(const Request& request);
  // Moves the decoded tokens into the slots' caches, then samples.
  void ApplyDecoded(const std::vector<Part>& plan,
                    const std::vector<float>& logits);

  // --- pool_pressure.cc ------------------------------------------------------
  // Resumes preempted requests, oldest first, while the step has room.
  void ResumePreempted();
  // Brings the slot's KV back (or schedules a recompute); false when there
  // is no room yet.
  bool Resume(Slot& slot);
  // Makes room for `*plan` (evicting idle slots, then preempting); may
  // shrink the plan. False when even that fails (the plan is then empty).
  bool MakeRoomForPlan(std::vector<Part>* plan);
  // Returns the free pages `plan` takes (paged placement).
  uint64_t PagesNeeded(const std::vector<Part>& plan) const;
  // Returns the pages `seq` must newly take to grow by `num_cells`.
  uint64_t PagesToGrow(SeqId seq, uint64_t num_cells) const;
  // Spills an idle resident slot (least recently used first); when no tier
  // takes any, drops the LRU one's KV under on-kv-full drop-lru. False
  // when nothing was freed.
  bool FreeOneIdleSlot();
  // Drops `victim`'s idle KV (drop-lru), counted and marked on the slot.
  void DropIdleKv(Slot& victim, const Status& why);
  // The error of a request that cannot get `need_pages`: reason kv_full
  // when idle slots' KV was kept by on-kv-full refuse, else no_room.
  Status PoolFullError(const Slot& slot, uint64_t need_pages);
  // Preempts the youngest request in the batch; false when at most one.
  bool PreemptYoungest();
  // Takes the slot's request out of batches and spills (or drops) its KV.
  void Preempt(Slot& slot);
  // Forgets the slot's KV; its request (if any) re-prefills the tokens.
  void DropKv(Slot& slot, const char* why);

  // --- generation.cc ---------------------------------------------------------
  // Samples the slot's next token from `row` and streams it; ends the
  // request on a stop condition or when the sink cancels.
  void HandleLogits(Slot& slot, std::span<const float> row);
  // Returns the text still held by the request's stop matcher and
  // detokenizer (generation is over).
  static std::string FlushText(Request& request);
  // Ends the slot's request with a result / an error; the slot keeps its KV.
  void Finish(Slot& slot, const std::string& stop_type, bool truncated);
  void Fail(Slot& slot, const Status& status);
  // Detaches the finished request; the slot is idle and LRU-touched.
  void ReleaseSlot(Slot& slot);

  // --- slot_actions.cc ------------------------------------------------------
  // True when slot files may be read and written off the scheduler thread
  // (not with contiguous+defrag: its Append may move cells mid-I/O).
  bool AsyncIoAllowed() const;
  // Saves/restores on the I/O thread when allowed, else at once.
  void StartSave(Slot& slot, const std::string& path,
                 Reply<SlotSaveResult> reply);
  void StartRestore(Slot& slot, const std::string& path,
                    Reply<SlotRestoreResult> reply);
  // The I/O half of an async save of `snapshot` (slot pinned meanwhile).
  IoOp SaveOp(Slot& slot, std::shared_ptr<SaveSnapshot> snapshot,
              const std::string& path, const std::string& where,
              Reply<SlotSaveResult> reply);
  // Reserves cells for the opened `file` and loads it on an I/O thread.
  void LoadRestore(Slot& slot, std::unique_ptr<RandomAccessFile> file,
                   const std::string& path, const std::string& where,
                   Reply<SlotRestoreResult> reply);
  // Unavailable, reason io_timeout, naming `where` and the deadline.
  Status IoTimeoutError(const std::string& where) const;
  // Synchronous versions (and the checks both share).
  Status CheckSavable(Slot& slot, const std::string& where);
  StatusOr<SlotSaveResult> DoSave(Slot& slot, const std::string& path);
  StatusOr<SlotRestoreResult> DoRestore(Slot& slot, const std::string& path);
  // Books a finished restore into `slot`.
  StatusOr<SlotRestoreResult> FinishRestore(
      Slot& slot, StatusOr<VaultRestoreResult> restored,
      const std::string& where);
  // Takes back the slots a disk tier kept from an earlier run (their KV is
  // brought in; what does not fit stays spilled); drops other entries.
  void RecoverSpilledSlots();
  // Returns a scratch sequence id no job in flight uses.
  SeqId NextScratch();
  // Drops the slot's KV everywhere; returns the tokens it held.
  StatusOr<uint64_t> DoErase(Slot& slot);
  // Defragments the pool (no I/O in flight).
  StatusOr<DefragReport> DoDefrag();
  // Sets slot.cached from the cache's sequence table.
  void RefreshCached(Slot& slot);
  // Maps a restore error to the API's reasons and counts it.
  Status CountRestoreError(const Status& status);

  std::unique_ptr<LlamaModel> model_;
  // Token texts for DRY's sequence breakers and infill; every Sampler
  // points at it.
  std::unique_ptr<TokenizerSamplerVocab> sampler_vocab_;
  // The vocabulary's pieces as a trie, built when the first request with a
  // grammar starts (scheduler thread).
  std::unique_ptr<TokenTrie> grammar_trie_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvVault> vault_;
  std::unique_ptr<InferenceContext> context_;

  // Scheduler thread only.
  std::vector<Slot> slots_;
  EngineMetrics counters_;  // pool/vault filled in snapshots
  uint64_t clock_ = 0;
  uint64_t admit_counter_ = 0;
  std::vector<std::function<void()>> deferred_;  // sink calls after publish
  int io_in_flight_ = 0;                         // IoOps not finished
  std::map<uint64_t, IoDeadline> io_deadlines_;  // by IoOp::id, in flight
  uint64_t next_io_id_ = 1;
  // A slot was released or I/O finished: queued items may run now.
  bool queue_may_progress_ = false;
  std::map<SeqId, uint32_t> scratch_slot_;       // restores in flight
  PrefillPacer pacer_{0, 1};  // prompt tokens per step beside decoding
  uint32_t next_scratch_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkItem> queue_;
  std::set<uint64_t> cancels_;
  uint64_t next_task_id_ = 1;
  bool wake_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  Snapshot published_;
  std::deque<IoOp> io_queue_;
  std::vector<std::pair<IoOp, Status>> io_done_;
  bool io_stopping_ = false;
  std::condition_variable io_cv_;  // io_queue_ or io_stopping_ changed
  std::thread scheduler_;
  std::vector<std::thread> io_threads_;  // one more per timed-out operation
};

// Returns the status a cancelled request or action ends with.
Status CancelledStatus(const std::string& what);

}  // namespace kvault

#endif  // KVAULT_ENGINE_ENGINE_IMPL_H_
