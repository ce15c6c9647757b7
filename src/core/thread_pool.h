// ThreadPool: a fixed set of worker threads running queued tasks in FIFO
// order, plus ParallelFor for data-parallel loops.
#ifndef KVAULT_CORE_THREAD_POOL_H_
#define KVAULT_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvault {

class ThreadPool {
 public:
  // Starts `num_threads` (>= 1) workers.
  explicit ThreadPool(size_t num_threads);
  // Runs every task still queued, then joins the workers. Must not be called
  // from a worker.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Returns the number of worker threads.
  size_t num_threads() const { return workers_.size(); }

  // Queues `task` to run on some worker. Thread-safe; callable from tasks.
  void Schedule(std::function<void()> task);

  // Calls fn(i) for every i in [begin, end), spread over the workers and the
  // calling thread, and returns when all calls have returned. Thread-safe;
  // callable from a task (the caller then does the work itself if every
  // worker is busy, so nesting cannot deadlock).
  void ParallelFor(size_t begin, size_t end,
                   const std::function<void(size_t)>& fn);

  // Blocks until the queue is empty and no task is running. Must not be
  // called from a task (it would wait for itself).
  void WaitIdle();

 private:
  void WorkerLoop();

  std::mutex mu_;
  // Signalled when a task is queued or the pool is stopping.
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;  // signalled when num_pending_ reaches 0
  std::deque<std::function<void()>> queue_;
  size_t num_pending_ = 0;  // queued + running tasks
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_THREAD_POOL_H_
