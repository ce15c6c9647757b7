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
      auto ready = [this] {
        return stopping_ || wake_ || HasRunnableWork() ||
               (queue_may_progress_ && !queue_.empty());
      };
      // Slot I/O in flight: wake at its deadline even if nothing else
      // happens, so a stuck file never holds its caller forever.
      if (const auto deadline = NextIoDeadline()) {
        cv_.wait_until(lock, *deadline, ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stopping_) break;
      wake_ = false;
      queue_may_progress_ = false;
      cancels.swap(cancels_);
      io_done.swap(io_done_);
    }
    FinishCompletedIo(std::move(io_done));
    ExpireIo();
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
    auto it = io_deadlines_.find(op.id);
    const bool timed_out = it != io_deadlines_.end() && it->second.timed_out;
    if (it != io_deadlines_.end()) io_deadlines_.erase(it);
    if (timed_out) {
      --counters_.io_stuck;
      op.late(status);
    } else {
      op.finish(status);
    }
    --io_in_flight_;
    queue_may_progress_ = true;
  }
}

std::optional<std::chrono::steady_clock::time_point>
Engine::Impl::NextIoDeadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [id, d] : io_deadlines_) {
    if (!d.timed_out && (!next || d.at < *next)) next = d.at;
  }
  return next;
}

void Engine::Impl::ExpireIo() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, d] : io_deadlines_) {
    if (d.timed_out || now < d.at) continue;
    d.timed_out = true;
    ++counters_.io_timeouts;
    ++counters_.io_stuck;
    d.on_timeout();
    // The stuck thread may never return; the queue needs another.
    io_threads_.emplace_back([this] { IoLoop(); });
    queue_may_progress_ = true;
  }
}

Status Engine::Impl::CheckIoCapacity(const std::string& where) {
  // Each stuck operation pins a thread (and a restore's reserved cells);
  // past one per slot the filesystem is clearly not coming back soon.
  if (counters_.io_stuck < options_.n_slots) return Status::Ok();
  return UnavailableError(where + ": " + std::to_string(counters_.io_stuck) +
                          " slot file operations are stuck in the "
                          "filesystem past their deadline")
      .WithReason(kReasonIoTimeout);
}

void Engine::Impl::StartIo(IoOp op) {
  ++io_in_flight_;
  op.id = next_io_id_++;
  io_deadlines_[op.id] = IoDeadline{
      std::chrono::steady_clock::now() +
          std::chrono::milliseconds(options_.slot_io_timeout_ms),
      std::move(op.on_timeout), false};
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
  // A thread stuck in the filesystem was waited for above: shutting down
  // cannot free memory its I/O may still touch.
  for (std::thread& thread : io_threads_) {
    if (thread.joinable()) thread.join();
  }
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
    info.n_kv_dropped = slot.cached.empty() ? slot.kv_dropped : 0;
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
