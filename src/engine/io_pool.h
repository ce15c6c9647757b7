// IoPool: the threads that run slot jobs' file I/O (job_runner.h) off the
// scheduler thread, so a slow or hung file (a FIFO, a stalled network
// mount) never stops other slots' decoding, and one slot's slow fsync
// never queues another slot's restore behind it (a job's deadline runs from
// its submission). Tickets start in submission order on whichever thread is
// free; each result is handed back through the
// `on_done` callback given at construction, which runs on the I/O thread.
// A ticket that outlives its deadline keeps its thread (it may never
// return), so the engine adds a thread for each one (AddThread) and the
// queue keeps moving.
#ifndef KVAULT_ENGINE_IO_POOL_H_
#define KVAULT_ENGINE_IO_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "engine/job_runner.h"

namespace kvault {

class IoPool {
 public:
  // Called on an I/O thread with a ticket's id and its Io() status.
  using DoneFn = std::function<void(uint64_t ticket_id, Status status)>;

  // Starts `num_threads` (>= 1) threads; `on_done` must be safe to call
  // from any of them.
  IoPool(DoneFn on_done, size_t num_threads);
  // Stops and joins (Stop).
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Queues `tickets` after those already queued and wakes the threads.
  void Submit(std::vector<IoTicket> tickets) EXCLUDES(mu_);
  // Starts one more thread (one is stuck in an I/O past its deadline).
  void AddThread();
  // Lets the queued tickets run, then ends and joins every thread; a
  // thread stuck in the filesystem is waited for (its I/O may still touch
  // memory the caller frees next). Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const DoneFn on_done_;
  Mutex mu_;
  CondVar cv_;  // queue_ or stopping_ changed
  std::deque<IoTicket> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // owner thread only
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_IO_POOL_H_
