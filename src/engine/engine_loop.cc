// The scheduler thread's loop, the hand-over of slot I/O to the IoPool,
// shutdown, and publishing the snapshot readers see (rebuilt after every
// step, before results are delivered).
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
  for (size_t i = 0; i < stuck; ++i) io_->AddThread();
  for (Work& work : inbox.work) scheduler_->Enqueue(std::move(work));
  if (!inbox.cancels.empty()) scheduler_->Cancel(inbox.cancels);
}

// --- Slot I/O ---------------------------------------------------------------

void Engine::Impl::DispatchIo() { io_->Submit(scheduler_->jobs().TakeIo()); }

void Engine::Impl::OnIoDone(uint64_t ticket_id, Status status) {
  {
    MutexLock lock(&mu_);
    inbox_.io_done.emplace_back(ticket_id, std::move(status));
    wake_ = true;
  }
  cv_.SignalAll();
}

// --- Shutdown ---------------------------------------------------------------

void Engine::Impl::CancelEverything() {
  // Slot I/O in flight finishes (a restore job must commit or abort).
  while (scheduler_->jobs().num_io_in_flight() > 0) {
    std::vector<std::pair<uint64_t, Status>> done;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_,
               [this]() REQUIRES(mu_) { return !inbox_.io_done.empty(); });
      done.swap(inbox_.io_done);
    }
    for (auto& [id, status] : done) scheduler_->jobs().OnIoDone(id, status);
    DispatchIo();
  }
  {
    MutexLock lock(&mu_);
    for (Work& work : inbox_.work) scheduler_->Enqueue(std::move(work));
    inbox_.work.clear();
  }
  // A thread stuck in the filesystem was waited for above: shutting down
  // cannot free memory its I/O may still touch.
  io_->Stop();
  scheduler_->CancelAll();
  PublishAndDeliver();
}

// --- Snapshots --------------------------------------------------------------

void Engine::Impl::PublishAndDeliver() {
  DispatchIo();
  EngineSnapshot snapshot =
      BuildEngineSnapshot(*scheduler_, *vault_, *cache_,
                          prefix_store_.get(), options_.ctx_per_slot);
  {
    MutexLock lock(&mu_);
    published_ = std::move(snapshot);
  }
  Deliveries calls;
  calls.swap(scheduler_->state().deliveries);
  for (auto& call : calls) call();
}

}  // namespace kvault
