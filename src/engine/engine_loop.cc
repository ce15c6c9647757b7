// The scheduler thread's loop, the I/O thread, shutdown, and the snapshots
// readers see (rebuilt after every step, before results are delivered).
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {

// --- Impl: the scheduler thread ---------------------------------------------

void Engine::Impl::SchedulerLoop() {
  while (true) {
    std::set<uint64_t> cancels;
    std::vector<std::pair<IoOp, Status>> io_done;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stopping_ || wake_ || HasRunnableWork() ||
               (queue_may_progress_ && !queue_.empty());
      });
      if (stopping_) break;
      wake_ = false;
      queue_may_progress_ = false;
      cancels.swap(cancels_);
      io_done.swap(io_done_);
    }
    FinishCompletedIo(std::move(io_done));
    ProcessCancels(cancels);
    bool ran_action = false;
    std::vector<WorkItem> waiting;  // back to the queue's front, in order
    for (WorkItem& item : TakeRunnable()) {
      if (item.is_action) {
        item.run(item.slot ? &slots_[*item.slot] : nullptr);
        ran_action = true;
      } else if (MustWaitForRoom(slots_[*item.slot], item.params)) {
        waiting.push_back(std::move(item));
      } else {
        StartRequest(slots_[*item.slot], std::move(item));
      }
    }
    if (!waiting.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
        queue_.push_front(std::move(*it));
      }
    }
    // The action's caller may read statistics as soon as it returns.
    if (ran_action) PublishAndDeliver();
    ResumePreempted();
    Step();
    PublishAndDeliver();
  }
  CancelEverything();
}

void Engine::Impl::FinishCompletedIo(
    std::vector<std::pair<IoOp, Status>> done) {
  for (auto& [op, status] : done) {
    op.finish(status);
    --io_in_flight_;
    queue_may_progress_ = true;
  }
}

void Engine::Impl::StartIo(IoOp op) {
  ++io_in_flight_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    io_queue_.push_back(std::move(op));
  }
  io_cv_.notify_all();
}

void Engine::Impl::IoLoop() {
  while (true) {
    IoOp op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      io_cv_.wait(lock, [this] { return io_stopping_ || !io_queue_.empty(); });
      if (io_queue_.empty()) return;
      op = std::move(io_queue_.front());
      io_queue_.pop_front();
    }
    Status status = op.io();
    {
      std::lock_guard<std::mutex> lock(mu_);
      io_done_.emplace_back(std::move(op), std::move(status));
      wake_ = true;
    }
    cv_.notify_all();
  }
}

void Engine::Impl::CancelEverything() {
  // Slot I/O in flight finishes (a restore job must commit or abort).
  while (io_in_flight_ > 0) {
    std::vector<std::pair<IoOp, Status>> done;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !io_done_.empty(); });
      done.swap(io_done_);
    }
    FinishCompletedIo(std::move(done));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    io_stopping_ = true;
  }
  io_cv_.notify_all();
  if (io_thread_.joinable()) io_thread_.join();
  std::deque<WorkItem> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued.swap(queue_);
  }
  for (WorkItem& item : queued) {
    const Status cancelled =
        CancelledStatus("task " + std::to_string(item.task_id));
    if (item.is_action) {
      item.fail(cancelled);
    } else {
      item.sink->OnDone(cancelled);
    }
  }
  for (Slot& slot : slots_) {
    if (slot.request != nullptr) {
      Fail(slot, CancelledStatus("task " +
                                std::to_string(slot.request->task_id)));
    }
  }
  PublishAndDeliver();
}

void Engine::Impl::PublishAndDeliver() {
  Snapshot snapshot = BuildSnapshot();
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_ = std::move(snapshot);
  }
  std::vector<std::function<void()>> calls;
  calls.swap(deferred_);
  for (auto& call : calls) call();
}

Engine::Impl::Snapshot Engine::Impl::BuildSnapshot() const {
  Snapshot s;
  for (const Slot& slot : slots_) {
    SlotInfo info;
    info.id = slot.id;
    info.n_ctx = options_.ctx_per_slot;
    info.is_processing = slot.busy();
    info.spilled = vault_->IsSpilled(slot.seq);
    SlotState state = SlotState::kIdle;
    if (slot.io) {
      state = SlotState::kIo;
    } else if (info.spilled) {
      state = SlotState::kSpilled;
    } else if (slot.request != nullptr) {
      state = slot.request->prompt_done ? SlotState::kGenerating
                                        : SlotState::kPrefill;
    }
    info.state = SlotStateName(state);
    info.n_cached = slot.cached.size();
    if (slot.request != nullptr) info.id_task = slot.request->task_id;
    info.params = slot.last_params;
    info.n_predict = slot.last_n_predict;
    info.n_decoded = slot.request != nullptr
                         ? slot.request->result.tokens.size()
                         : slot.last_n_decoded;
    s.slots.push_back(std::move(info));
  }
  s.metrics = counters_;
  s.metrics.requests_processing = 0;
  for (const Slot& slot : slots_) {
    if (slot.request != nullptr) ++s.metrics.requests_processing;
  }
  s.map = BuildKvMap();
  s.metrics.pool = s.map.stats;
  s.metrics.vault = vault_->Stats();
  return s;
}

KvMap Engine::Impl::BuildKvMap() const {
  KvMap map;
  map.stats = cache_->Stats();
  map.stats.sequences.clear();
  map.page_size = cache_->pool().page_size();
  map.page_slot.assign(cache_->pool().num_pages(), std::nullopt);
  for (SeqId seq : cache_->table().SequenceIds()) {
    uint32_t slot = seq.value();
    if (slot >= slots_.size()) {
      // A restore in flight shows as its target slot's.
      auto it = scratch_slot_.find(seq);
      if (it == scratch_slot_.end()) continue;
      slot = it->second;
    }
    for (PageId page : cache_->table().Pages(seq)) {
      std::optional<uint32_t>& owner = map.page_slot[page.value()];
      if (!owner || *owner > slot) owner = slot;
    }
  }
  return map;
}

}  // namespace kvault
