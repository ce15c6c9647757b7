#include "engine/io_pool.h"

#include <algorithm>
#include <utility>

namespace kvault {

IoPool::IoPool(DoneFn on_done, size_t num_threads)
    : on_done_(std::move(on_done)) {
  for (size_t i = 0; i < std::max<size_t>(num_threads, 1); ++i) AddThread();
}

IoPool::~IoPool() { Stop(); }

void IoPool::Submit(std::vector<IoTicket> tickets) {
  if (tickets.empty()) return;
  {
    MutexLock lock(&mu_);
    queue_.insert(queue_.end(), tickets.begin(), tickets.end());
  }
  cv_.SignalAll();
}

void IoPool::AddThread() {
  threads_.emplace_back([this] { Loop(); });
}

void IoPool::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void IoPool::Loop() {
  while (true) {
    IoTicket ticket;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_,
               [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      ticket = queue_.front();
      queue_.pop_front();
    }
    on_done_(ticket.id, ticket.job->Io());
  }
}

}  // namespace kvault
