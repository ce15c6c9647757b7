// EngineHost: owns the engine (and through it the model) for a server that
// sleeps (--sleep-idle-seconds). After `idle` with no waking lease held it
// unloads the engine, freeing the model's memory; the next Wake loads it
// again. A watcher thread waits on a condition variable for the deadline
// (no polling); leases keep the engine alive while a request uses it.
#ifndef KVAULT_SERVER_ENGINE_HOST_H_
#define KVAULT_SERVER_ENGINE_HOST_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "core/mutex.h"
#include "core/status_or.h"
#include "engine/engine.h"

namespace kvault {

class EngineHost {
 public:
  using Loader = std::function<StatusOr<std::unique_ptr<Engine>>()>;
  using Clock = std::chrono::steady_clock;

  // Keeps the engine alive while held; movable, releases on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    // Returns the engine, or null for an empty lease (asleep at Peek).
    Engine* engine() const { return engine_; }

   private:
    friend class EngineHost;
    void Release();
    EngineHost* host_ = nullptr;
    Engine* engine_ = nullptr;
    bool waking_ = false;  // counts as activity for the idle deadline
  };

  // Called with the host's lock held, so keep them short and never call
  // back into the host: before the engine is unloaded, and after a load.
  struct Hooks {
    std::function<void(Engine&)> before_sleep;
    std::function<void(Engine&)> after_wake;
  };

  // Hosts `engine` (non-null); `load` makes a new one on waking. `idle`
  // must be positive.
  EngineHost(std::unique_ptr<Engine> engine, Loader load,
             std::chrono::milliseconds idle);
  // Stops the watcher and shuts the engine down (Shutdown).
  ~EngineHost();
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // Installs the hooks (before any sleep can see the old ones).
  void SetHooks(Hooks hooks) EXCLUDES(mu_);
  // Returns a lease on the engine, loading it first when asleep (one load
  // at a time; others wait for it). The load's error, or Unavailable after
  // Shutdown.
  StatusOr<Lease> Wake() EXCLUDES(mu_);
  // Returns a lease when awake (not loading), else an empty one; it does
  // not count as activity, so read-only requests let the server sleep.
  Lease Peek() EXCLUDES(mu_);
  // Returns true while the engine is unloaded.
  bool sleeping() const EXCLUDES(mu_);
  // Stops the watcher, then shuts down and frees the engine; Wake fails
  // afterwards. Idempotent.
  void Shutdown() EXCLUDES(mu_);

 private:
  void Watch() EXCLUDES(mu_);
  void SleepLocked() REQUIRES(mu_);
  void ReleaseLease(bool waking) EXCLUDES(mu_);
  Lease MakeLeaseLocked(bool waking) REQUIRES(mu_);

  const Loader load_;
  const std::chrono::milliseconds idle_;
  mutable Mutex mu_;
  CondVar cv_;
  std::unique_ptr<Engine> engine_ GUARDED_BY(mu_);  // null while asleep
  Hooks hooks_ GUARDED_BY(mu_);
  int leases_ GUARDED_BY(mu_) = 0;
  bool loading_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  Clock::time_point last_active_ GUARDED_BY(mu_);
  std::thread watcher_;  // started by the constructor, joined by Shutdown
};

}  // namespace kvault

#endif  // KVAULT_SERVER_ENGINE_HOST_H_
