#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/check.h"

namespace kvault {
namespace {

// Shared by the participants of one ParallelFor. Helper tasks may outlive the
// call (they find no index left), hence shared ownership.
struct ParallelForState {
  ParallelForState(size_t begin, size_t end,
                   const std::function<void(size_t)>* fn)
      : next(begin), end(end), num_total(end - begin), fn(fn) {}

  std::atomic<size_t> next;  // the next unclaimed index
  const size_t end;
  const size_t num_total;
  // Dereferenced only after claiming an index, which can no longer happen
  // once ParallelFor has returned.
  const std::function<void(size_t)>* const fn;

  std::mutex mu;
  std::condition_variable done_cv;
  size_t num_done = 0;  // guarded by mu
};

// Claims and runs indices until none are left.
void RunIndices(ParallelForState& state) {
  size_t num_ran = 0;
  for (size_t i = state.next.fetch_add(1); i < state.end;
       i = state.next.fetch_add(1)) {
    (*state.fn)(i);
    ++num_ran;
  }
  if (num_ran == 0) return;
  std::lock_guard<std::mutex> lock(state.mu);
  state.num_done += num_ran;
  if (state.num_done == state.num_total) state.done_cv.notify_all();
}

}  // namespace

ThreadPool::ThreadPool(size_t num_threads) {
  KV_CHECK_GE(num_threads, 1u) << "a ThreadPool needs a worker";
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  KV_CHECK(task != nullptr) << "Schedule of an empty task";
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    ++num_pending_;
  }
  work_cv_.notify_one();
}

void ThreadPool::ParallelFor(size_t begin, size_t end,
                             const std::function<void(size_t)>& fn) {
  if (begin >= end) return;
  const size_t num_items = end - begin;
  // The headroom keeps the overshooting fetch_add of each participant from
  // wrapping around.
  KV_CHECK_LE(end, SIZE_MAX - num_threads() - 1) << "ParallelFor range too big";
  if (num_items == 1) {
    fn(begin);
    return;
  }
  auto state = std::make_shared<ParallelForState>(begin, end, &fn);
  const size_t num_helpers = std::min(num_threads(), num_items - 1);
  for (size_t i = 0; i < num_helpers; ++i) {
    Schedule([state] { RunIndices(*state); });
  }
  RunIndices(*state);
  std::unique_lock<std::mutex> lock(state->mu);
  state->done_cv.wait(lock,
                      [&] { return state->num_done == state->num_total; });
}

void ThreadPool::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return num_pending_ == 0; });
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      // Stop only once drained: tasks queued before destruction still run.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    task = nullptr;  // release captures before the pool looks idle
    std::lock_guard<std::mutex> lock(mu_);
    if (--num_pending_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace kvault
