// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations (core/thread_annotations.h), so that
// fields marked GUARDED_BY(mu_) are checked to be touched only under mu_
// (scripts/check-thread-safety). The shape follows LevelDB's port::Mutex,
// MutexLock and port::CondVar; the std types underneath do all the work, so
// the wrappers cost nothing over using them directly.
//
//   Mutex mu_;
//   CondVar cv_;
//   std::deque<Item> queue_ GUARDED_BY(mu_);
//
//   void Push(Item item) EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     queue_.push_back(std::move(item));
//     cv_.Signal();
//   }
//   Item Pop() EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     while (queue_.empty()) cv_.Wait(&mu_);
//     ...
//   }
//
// A predicate passed to Wait/WaitUntil runs with the mutex held, but the
// analysis checks a lambda's body on its own: a lambda that reads guarded
// fields says so with `[&]() REQUIRES(mu_) { ... }`, or the wait is written
// as the loop above.
#ifndef KVAULT_CORE_MUTEX_H_
#define KVAULT_CORE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/thread_annotations.h"

namespace kvault {

class CondVar;

// A non-recursive mutual-exclusion lock.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until this thread holds the mutex. Must not already hold it.
  void Lock() ACQUIRE() { mu_.lock(); }
  // Releases the mutex, which this thread must hold.
  void Unlock() RELEASE() { mu_.unlock(); }
  // Takes the mutex if it is free and returns true; returns false at once
  // (without it) when another thread holds it.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the mutex is held here (for code it cannot follow,
  // e.g. a callback invoked under the lock); checks nothing at run time,
  // since std::mutex does not know its owner.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for the lifetime of the object (RAII).
class SCOPED_CAPABILITY MutexLock {
 public:
  // Locks `mu` (non-null), which must outlive this object.
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  // Unlocks the mutex.
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable waited on with a Mutex held. Waits may wake
// spuriously; the predicate forms (or a loop around the plain ones) handle
// that. One CondVar may be used with one Mutex at a time.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` (held by this thread), blocks until signalled (or
  // spuriously woken), then takes `mu` again before returning.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // `mu` stays held, owned by the caller again
  }

  // Waits (as Wait) until pred() is true; pred runs with `mu` held. Returns
  // at once when pred() already holds.
  // (The body is not analysed: the analysis cannot tell that `mu` is the
  // mutex a `REQUIRES(mu_)` lambda names; callers are still checked.)
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) Wait(mu);
  }

  // Waits (as Wait) until signalled or `deadline` passes; returns false
  // when it returned because the deadline passed, true otherwise.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu,
                 const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status == std::cv_status::no_timeout;
  }

  // Waits (as Wait) until pred() is true or `deadline` passes; returns the
  // last value of pred() (false: the deadline passed first). Not analysed
  // inside, as the predicate Wait.
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex* mu,
                 const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) {
      if (!WaitUntil(mu, deadline)) return pred();
    }
    return true;
  }

  // Wakes one waiting thread, if any. Needs no lock.
  void Signal() { cv_.notify_one(); }
  // Wakes every waiting thread. Needs no lock.
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_MUTEX_H_
