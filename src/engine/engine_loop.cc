// The scheduler thread's loop, the I/O threads, shutdown, and the
// snapshots readers see (rebuilt after every step, before results are
// delivered).
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace kvault {

// --- The scheduler thread ---------------------------------------------------

void Engine::Impl::SchedulerLoop() {
  Inbox inbox;
  while (WaitForInput(&inbox)) {
    Feed(std::move(inbox));
    inbox = Inbox{};
    // An action's caller may read statistics as soon as it returns.
    if (scheduler_->Admit()) PublishAndDeliver();
    scheduler_->Step();
    PublishAndDeliver();
  }
  CancelEverything();
}

bool Engine::Impl::WaitForInput(Inbox* inbox) {
  MutexLock lock(&mu_);
  auto ready = [this]() REQUIRES(mu_) {
    return stopping_ || wake_ || scheduler_->HasWork();
  };
  // Slot I/O in flight: wake at its deadline even if nothing else
  // happens, so a stuck file never holds its caller forever.
  if (const auto deadline = scheduler_->jobs().NextDeadline()) {
    cv_.WaitUntil(&mu_, *deadline, ready);
  } else {
    cv_.Wait(&mu_, ready);
  }
  if (stopping_) return false;
  wake_ = false;
  std::swap(*inbox, inbox_);
  // Until the next publish, Metrics counts these as deferred.
  for (const Work& work : inbox->work) {
    if (std::holds_alternative<CompletionWork>(work)) {
      ++published_.metrics.requests_deferred;
    }
  }
  return true;
}

void Engine::Impl::Feed(Inbox inbox) {
  for (auto& [id, status] : inbox.io_done) {
    scheduler_->jobs().OnIoDone(id, status);
  }
  const size_t stuck = scheduler_->jobs().Expire(EngineClock::now());
  // Each stuck I/O may never return; the queue needs another thread.
  for (size_t i = 0; i < stuck; ++i) {
    io_threads_.emplace_back([this] { IoLoop(); });
  }
  for (Work& work : inbox.work) scheduler_->Enqueue(std::move(work));
  if (!inbox.cancels.empty()) scheduler_->Cancel(inbox.cancels);
}

// --- I/O threads ------------------------------------------------------------

void Engine::Impl::DispatchIo() {
  std::vector<IoTicket> tickets = scheduler_->jobs().TakeIo();
  if (tickets.empty()) return;
  {
    MutexLock lock(&mu_);
    io_queue_.insert(io_queue_.end(), tickets.begin(), tickets.end());
  }
  io_cv_.SignalAll();
}

void Engine::Impl::IoLoop() {
  while (true) {
    IoTicket ticket;
    {
      MutexLock lock(&mu_);
      io_cv_.Wait(&mu_, [this]() REQUIRES(mu_) {
        return io_stopping_ || !io_queue_.empty();
      });
      if (io_queue_.empty()) return;
      ticket = io_queue_.front();
      io_queue_.pop_front();
    }
    Status status = ticket.job->Io();
    {
      MutexLock lock(&mu_);
      inbox_.io_done.emplace_back(ticket.id, std::move(status));
      wake_ = true;
    }
    cv_.SignalAll();
  }
}

// --- Shutdown ---------------------------------------------------------------

void Engine::Impl::CancelEverything() {
  // Slot I/O in flight finishes (a restore job must commit or abort).
  while (scheduler_->jobs().num_io_in_flight() > 0) {
    std::vector<std::pair<uint64_t, Status>> done;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return !inbox_.io_done.empty(); });
      done.swap(inbox_.io_done);
    }
    for (auto& [id, status] : done) scheduler_->jobs().OnIoDone(id, status);
    DispatchIo();
  }
  {
    MutexLock lock(&mu_);
    io_stopping_ = true;
    for (Work& work : inbox_.work) scheduler_->Enqueue(std::move(work));
    inbox_.work.clear();
  }
  io_cv_.SignalAll();
  // A thread stuck in the filesystem was waited for above: shutting down
  // cannot free memory its I/O may still touch.
  for (std::thread& thread : io_threads_) {
    if (thread.joinable()) thread.join();
  }
  scheduler_->CancelAll();
  PublishAndDeliver();
}

// --- Snapshots --------------------------------------------------------------

void Engine::Impl::PublishAndDeliver() {
  DispatchIo();
  Snapshot snapshot = BuildSnapshot();
  {
    MutexLock lock(&mu_);
    published_ = std::move(snapshot);
  }
  Deliveries calls;
  calls.swap(scheduler_->state().deliveries);
  for (auto& call : calls) call();
}

namespace {

// The state /slots shows (the names llama-server users already read).
const char* DisplayState(const Slot& slot, bool spilled) {
  if (slot.state == SlotState::kIo) return "io";
  if (spilled) return "spilled";
  if (slot.request == nullptr) return "idle";
  return slot.request->prompt_done ? "generating" : "prefill";
}

}  // namespace

Engine::Impl::Snapshot Engine::Impl::BuildSnapshot() const {
  Snapshot s;
  const SchedulerState& state = scheduler_->state();
  for (const Slot& slot : state.slots) {
    SlotInfo info;
    info.id = slot.id;
    info.n_ctx = options_.ctx_per_slot;
    info.is_processing = slot.busy();
    info.spilled = vault_->IsSpilled(slot.seq);
    info.state = DisplayState(slot, info.spilled);
    info.n_cached = slot.cached.size();
    info.n_kv_dropped = slot.cached.empty() ? slot.kv_dropped : 0;
    if (slot.request != nullptr) info.id_task = slot.request->task_id;
    info.params = slot.last_params;
    info.n_predict = slot.last_n_predict;
    info.n_decoded = slot.request != nullptr
                         ? slot.request->result.tokens.size()
                         : slot.last_n_decoded;
    if (slot.request != nullptr) ++s.metrics.requests_processing;
    s.slots.push_back(std::move(info));
  }
  const uint64_t processing = s.metrics.requests_processing;
  s.metrics = state.counters;
  s.metrics.requests_processing = processing;
  s.metrics.requests_deferred = scheduler_->NumQueuedCompletions();
  s.map = BuildKvMap();
  s.metrics.pool = s.map.stats;
  s.metrics.vault = vault_->Stats();
  return s;
}

KvMap Engine::Impl::BuildKvMap() const {
  const std::map<SeqId, uint32_t> scratch_slot =
      scheduler_->jobs().ScratchOwners();
  const size_t num_slots = scheduler_->state().slots.size();
  KvMap map;
  map.stats = cache_->Stats();
  map.stats.sequences.clear();
  map.page_size = cache_->pool().page_size();
  map.page_slot.assign(cache_->pool().num_pages(), std::nullopt);
  for (SeqId seq : cache_->table().SequenceIds()) {
    uint32_t slot = seq.value();
    if (slot >= num_slots) {
      // A restore in flight shows as its target slot's.
      auto it = scratch_slot.find(seq);
      if (it == scratch_slot.end()) continue;
      slot = it->second;
    }
    for (PageId page : cache_->table().Pages(seq)) {
      std::optional<uint32_t>& owner = map.page_slot[page.value()];
      if (!owner || *owner > slot) owner = slot;
    }
  }
  return map;
}

// --- Start-up ---------------------------------------------------------------

void Engine::Impl::RecoverSpilledSlots() {
  const size_t num_slots = scheduler_->state().slots.size();
  for (SeqId seq : vault_->SpilledSequences()) {
    if (seq.value() < num_slots) {
      StatusOr<std::optional<VaultRestoreResult>> back =
          vault_->EnsureResident(seq);
      if (back.ok()) {
        Slot probe(seq.value());
        RefreshCached(*cache_, probe);
        KV_LOG(INFO) << "slot " << seq.value() << ": recovered "
                     << probe.cached.size() << " tokens from the disk tier";
        scheduler_->AdoptRecovered(seq.value(), std::move(probe.cached));
        continue;
      }
      KV_LOG(WARNING) << "slot " << seq.value()
                      << ": dropping the KV an earlier run spilled: "
                      << back.status();
    }
    Status erased = vault_->Erase(seq);
    if (!erased.ok()) KV_LOG(WARNING) << erased;
  }
}

}  // namespace kvault
