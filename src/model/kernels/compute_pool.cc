#include "model/kernels/compute_pool.h"

#include <chrono>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kvault::kernels {
namespace {

// How long an idle worker spins before sleeping: longer than the gaps
// between the loops of one forward pass (norms, RoPE, small attention),
// short enough not to burn a core between requests.
constexpr auto kSpinTime = std::chrono::microseconds(500);

// Iterations of pure pause-spinning before a waiter starts yielding.
constexpr uint32_t kPauseSpins = 1024;

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// One step of a wait loop: pause-spin at first (lowest latency on idle
// cores), then yield, which costs an idle core ~a microsecond but hands an
// oversubscribed core to the thread being waited for.
inline void WaitStep(uint32_t k) {
  if (k < kPauseSpins) {
    CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

// Set while a thread runs pool work, so a nested Run goes inline.
thread_local bool t_in_pool_work = false;

}  // namespace

ComputePool::ComputePool(size_t num_workers, bool spin)
    : spin_time_(spin ? kSpinTime : std::chrono::microseconds(0)) {
  KV_CHECK_GE(num_workers, 1u) << "a ComputePool needs a worker";
  workers_.reserve(num_workers);
  for (size_t i = 0; i < num_workers; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ComputePool::~ComputePool() {
  {
    MutexLock lock(&run_mu_);
    stopping_ = true;
    generation_.fetch_add(1);
    generation_.notify_all();
  }
  for (std::thread& worker : workers_) worker.join();
}

void ComputePool::RunIndices() {
  uint64_t word = work_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t index = word & 0xffffffffu;
    if (index >= (word >> 32)) return;  // every index claimed
    // acq_rel: a successful claim sees the fields Run wrote before
    // publishing this word; a failed one reloads `word`.
    if (work_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      fn_(ctx_, static_cast<size_t>(index));
      num_done_.fetch_add(1, std::memory_order_release);
      word = work_.load(std::memory_order_acquire);
    }
  }
}

void ComputePool::WorkerLoop() {
  t_in_pool_work = true;
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + spin_time_;
    for (uint32_t k = 1; gen == seen; ++k) {
      WaitStep(k);
      if (k % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        // Publishing the sleep before re-reading generation_ (both seq_cst)
        // means Run either sees a sleeper and notifies, or bumped the
        // generation before the read below, so no wake-up is lost.
        num_sleeping_.fetch_add(1);
        generation_.wait(seen);
        num_sleeping_.fetch_sub(1);
      }
      gen = generation_.load(std::memory_order_acquire);
    }
    // Loops may have been published and finished meanwhile; the claim word
    // says whether the latest still has work.
    seen = gen;
    if (stopping_) return;
    RunIndices();
  }
}

void ComputePool::Run(size_t n, Fn fn, const void* ctx) {
  // Inline: a trivial loop, a nested call from pool work, or another Run
  // in progress.
  const bool inline_only = n <= 1 || t_in_pool_work;
  if (inline_only || !run_mu_.TryLock()) {
    for (size_t i = 0; i < n; ++i) fn(ctx, i);
    return;
  }
  KV_CHECK_LT(n, size_t{1} << 32) << "ComputePool loop too long";
  // The previous loop is complete (num_done_ reached its n), so no thread
  // holds a claim and nobody reads these fields now.
  fn_ = fn;
  ctx_ = ctx;
  num_done_.store(0, std::memory_order_relaxed);
  work_.store(static_cast<uint64_t>(n) << 32, std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: wakes spinning workers
  if (num_sleeping_.load() > 0) generation_.notify_all();
  t_in_pool_work = true;
  RunIndices();
  t_in_pool_work = false;
  for (uint32_t k = 0; num_done_.load(std::memory_order_acquire) < n; ++k) {
    WaitStep(k);
  }
  run_mu_.Unlock();
}

}  // namespace kvault::kernels
