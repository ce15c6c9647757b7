// ComputePool: persistent workers for the short data-parallel loops of a
// forward pass (a decode step runs ~60 MatMuls of a few microseconds each).
// Unlike a thread pool that hands every loop to sleeping workers through a
// queue and condition variables (tens of microseconds to wake them), the
// workers spin for a while after each loop waiting for the next one, then
// sleep on a futex, so back-to-back loops start in well under a microsecond.
#ifndef KVAULT_MODEL_KERNELS_COMPUTE_POOL_H_
#define KVAULT_MODEL_KERNELS_COMPUTE_POOL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/mutex.h"

namespace kvault::kernels {

class ComputePool {
 public:
  // A loop body: fn(ctx, i) for one index i.
  using Fn = void (*)(const void* ctx, size_t i);

  // Starts `num_workers` (>= 1) worker threads. With `spin` an idle worker
  // spins for a while before sleeping (the point of this pool); without,
  // it sleeps almost at once, which suits oversubscribed machines, where
  // spinning workers take cores from the threads they wait for.
  explicit ComputePool(size_t num_workers, bool spin = true);
  // Stops and joins the workers. No Run may be in progress.
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Returns the worker count (the caller of Run participates too).
  size_t num_workers() const { return workers_.size(); }

  // Calls fn(ctx, i) for every i in [0, n), spread over the workers and the
  // calling thread; returns when all calls have returned. Thread-safe: when
  // another thread is inside Run (or a worker calls it), the loop runs on
  // the calling thread alone.
  void Run(size_t n, Fn fn, const void* ctx) EXCLUDES(run_mu_);

  // Calls fn(i) for every i in [0, n) as Run does.
  template <typename F>
  void ParallelFor(size_t n, const F& fn) {
    Run(
        n, [](const void* c, size_t i) { (*static_cast<const F*>(c))(i); },
        &fn);
  }

 private:
  void WorkerLoop();
  // Claims and runs indices of the current loop until none are left.
  void RunIndices();

  const std::chrono::microseconds spin_time_;  // before an idle worker sleeps
  // One Run at a time; others run inline. Held by the Run that writes fn_
  // and ctx_; the workers read those without it, ordered by work_ (below).
  Mutex run_mu_;
  // Bumped to publish a loop (and to stop); workers wait for it to change.
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint32_t> num_sleeping_{0};
  // The current loop's claim word: (n << 32) | next unclaimed index. An
  // index is claimed by a compare-exchange on the whole word, so a worker
  // that wakes late can only ever claim an index of the loop in progress
  // (never run a finished loop's body), and Run need not wait for workers
  // that never showed up (e.g. descheduled on an oversubscribed machine).
  std::atomic<uint64_t> work_{0};
  std::atomic<size_t> num_done_{0};  // indices of the current loop finished
  // The current loop; written before work_ is published, read only by a
  // thread holding a claim (so never while Run rewrites them).
  Fn fn_ = nullptr;
  const void* ctx_ = nullptr;
  // Set under run_mu_ by the destructor; workers read it after seeing the
  // generation bump that publishes it.
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_COMPUTE_POOL_H_
