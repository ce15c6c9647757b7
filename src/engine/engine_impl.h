// Engine::Impl: the threads around the Scheduler. engine.cc builds
// everything and holds the public API; engine_loop.cc runs the scheduler
// thread (waiting for input, feeding the scheduler, publishing) and
// shutdown. The I/O threads are an IoPool (io_pool.h); the snapshot readers
// see is built by engine_snapshot.h.
//
// Threading: the scheduler thread alone touches the Scheduler, the
// KvCache, the KvVault and the InferenceContext. mu_ guards what other
// threads hand in (work, cancels, finished I/O), the stop flags and the
// published snapshot, which readers (Slots, Metrics, GetKvMap) copy; the
// scheduler thread publishes after every step and before it delivers
// results, so a caller that saw OnDone or a slot action's result reads
// statistics at least that fresh.
#ifndef KVAULT_ENGINE_ENGINE_IMPL_H_
#define KVAULT_ENGINE_ENGINE_IMPL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "engine/engine.h"
#include "engine/engine_ports.h"
#include "engine/engine_snapshot.h"
#include "engine/io_pool.h"
#include "engine/scheduler.h"
#include "engine/slot_jobs.h"
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
  // Queues the slot action `job` (on `slot`, checked against the slot
  // count; none: the whole pool), as Engine::Start* document.
  Status PostAction(std::optional<uint32_t> slot, std::unique_ptr<SlotJob> job);
  // Returns what slot jobs work on.
  JobTarget target() const {
    return {vault_.get(), cache_.get(), slot_mirror_.get(),
            prefix_store_.get()};
  }
  std::vector<SlotInfo> Slots() const;
  EngineMetrics Metrics() const;
  KvMap GetKvMap() const;
  void Shutdown();
  const LlamaModel& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }

 private:
  // What other threads handed in since the scheduler thread last looked.
  struct Inbox {
    std::deque<Work> work;
    std::set<uint64_t> cancels;
    std::vector<std::pair<uint64_t, Status>> io_done;  // IoTicket id
  };

  Impl(std::unique_ptr<LlamaModel> model, const EngineOptions& options);
  Status Init();

  // --- engine.cc: the public API -----------------------------------------
  // Queues `work` for the scheduler thread; Unavailable after Shutdown.
  StatusOr<uint64_t> Post(std::function<Work(uint64_t task_id)> make)
      EXCLUDES(mu_);

  // --- engine_loop.cc: threads, snapshots ---------------------------------
  // The scheduler thread: waits for input, feeds the scheduler, publishes.
  void SchedulerLoop();
  // Blocks until there is input or work (or a deadline); false on stop.
  bool WaitForInput(Inbox* inbox) EXCLUDES(mu_);
  // Hands `inbox` to the scheduler (finished I/O first).
  void Feed(Inbox inbox);
  // Hands a finished I/O ticket to the scheduler thread (I/O threads).
  void OnIoDone(uint64_t ticket_id, Status status) EXCLUDES(mu_);
  // Queues the I/O the scheduler's jobs asked for.
  void DispatchIo();
  // Ends everything at shutdown: lets I/O in flight finish, then cancels.
  void CancelEverything();
  // Rebuilds the snapshot, then runs the deferred sink calls and replies.
  void PublishAndDeliver();

  std::unique_ptr<LlamaModel> model_;
  // Token texts for DRY's sequence breakers and infill.
  std::unique_ptr<TokenizerSamplerVocab> sampler_vocab_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvVault> vault_;
  std::unique_ptr<InferenceContext> context_;
  std::unique_ptr<PrefixStore> prefix_store_;  // null: none
  std::unique_ptr<SlotFileMirror> slot_mirror_;  // null: no --kv-store
  std::unique_ptr<VaultSlotKv> slot_kv_;
  std::unique_ptr<ModelForwardPass> forward_;
  std::unique_ptr<Scheduler> scheduler_;  // scheduler thread only

  mutable Mutex mu_;
  CondVar cv_;  // inbox_, wake_ or stopping_ changed
  Inbox inbox_ GUARDED_BY(mu_);
  uint64_t next_task_id_ GUARDED_BY(mu_) = 1;
  bool wake_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  EngineSnapshot published_ GUARDED_BY(mu_);
  std::unique_ptr<IoPool> io_;  // built by Init; scheduler thread after
  std::thread scheduler_thread_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_ENGINE_IMPL_H_
