#include "server/engine_host.h"

#include <utility>

#include "core/log.h"

namespace kvault {

EngineHost::Lease& EngineHost::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    host_ = std::exchange(other.host_, nullptr);
    engine_ = std::exchange(other.engine_, nullptr);
    waking_ = other.waking_;
  }
  return *this;
}

void EngineHost::Lease::Release() {
  if (host_ != nullptr) host_->ReleaseLease(waking_);
  host_ = nullptr;
  engine_ = nullptr;
}

EngineHost::EngineHost(std::unique_ptr<Engine> engine, Loader load,
                       std::chrono::milliseconds idle)
    : load_(std::move(load)),
      idle_(idle),
      engine_(std::move(engine)),
      last_active_(Clock::now()) {
  watcher_ = std::thread([this] { Watch(); });
}

EngineHost::~EngineHost() { Shutdown(); }

void EngineHost::SetHooks(Hooks hooks) {
  MutexLock lock(&mu_);
  hooks_ = std::move(hooks);
}

EngineHost::Lease EngineHost::MakeLeaseLocked(bool waking) {
  Lease lease;
  lease.host_ = this;
  lease.engine_ = engine_.get();
  lease.waking_ = waking;
  ++leases_;
  if (waking) last_active_ = Clock::now();
  return lease;
}

StatusOr<EngineHost::Lease> EngineHost::Wake() {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return !loading_ || stopping_; });
  if (stopping_) return UnavailableError("server is stopping");
  if (engine_ != nullptr) return MakeLeaseLocked(true);
  loading_ = true;
  // Loads without the lock (it takes seconds); loading_ keeps a second
  // Wake, the watcher and Shutdown waiting meanwhile.
  mu_.Unlock();
  KV_LOG(INFO) << "waking up: loading the model";
  StatusOr<std::unique_ptr<Engine>> loaded = load_();
  mu_.Lock();
  loading_ = false;
  cv_.SignalAll();
  if (!loaded.ok()) {
    KV_LOG(ERROR) << "waking up failed: " << loaded.status();
    return loaded.status();
  }
  engine_ = std::move(loaded).value();
  if (stopping_) {
    engine_.reset();
    return UnavailableError("server is stopping");
  }
  if (hooks_.after_wake) hooks_.after_wake(*engine_);
  KV_LOG(INFO) << "awake";
  return MakeLeaseLocked(true);
}

EngineHost::Lease EngineHost::Peek() {
  MutexLock lock(&mu_);
  if (engine_ == nullptr || loading_) return Lease();
  return MakeLeaseLocked(false);
}

bool EngineHost::sleeping() const {
  MutexLock lock(&mu_);
  return engine_ == nullptr;
}

void EngineHost::ReleaseLease(bool waking) {
  MutexLock lock(&mu_);
  --leases_;
  if (waking) last_active_ = Clock::now();
  cv_.SignalAll();  // the watcher re-arms its deadline
}

void EngineHost::Watch() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (engine_ == nullptr || leases_ > 0) {
      cv_.Wait(&mu_);
      continue;
    }
    const Clock::time_point deadline = last_active_ + idle_;
    if (Clock::now() < deadline) {
      cv_.WaitUntil(&mu_, deadline);
      continue;
    }
    SleepLocked();
  }
}

// Unloads under the lock: a Wake arriving meanwhile waits rather than
// loading a second copy of the model beside the one being freed.
void EngineHost::SleepLocked() {
  KV_LOG(INFO) << "idle for " << idle_.count() << " ms: sleeping (unloading "
               << "the model)";
  if (hooks_.before_sleep) hooks_.before_sleep(*engine_);
  engine_->Shutdown();
  engine_.reset();
  cv_.SignalAll();
}

void EngineHost::Shutdown() {
  std::unique_ptr<Engine> engine;
  {
    MutexLock lock(&mu_);
    if (stopping_ && !watcher_.joinable()) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  if (watcher_.joinable()) watcher_.join();
  {
    MutexLock lock(&mu_);
    cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return !loading_; });
    engine = std::move(engine_);
  }
  if (engine != nullptr) engine->Shutdown();
}

}  // namespace kvault
