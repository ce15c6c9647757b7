// How long-running work on behalf of a request (a grammar compile) learns
// that its result is no longer wanted: the client left or the server is
// stopping. The work asks between bounded steps and ends with Cancelled;
// nothing is killed half-way, so no state is left inconsistent.
#ifndef KVAULT_CORE_INTERRUPT_H_
#define KVAULT_CORE_INTERRUPT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "core/mutex.h"
#include "core/status.h"

namespace kvault {

class Interrupt {
 public:
  virtual ~Interrupt() = default;
  // Returns true once the work should stop (and from then on).
  virtual bool Requested() const = 0;
};

// An Interrupt that one thread raises and the working thread reads.
class CancelFlag final : public Interrupt {
 public:
  // Raises the flag and wakes WaitUntilRaised. Idempotent.
  void Raise() EXCLUDES(mu_);
  bool Requested() const override {
    return raised_.load(std::memory_order_acquire);
  }
  // Blocks until Raise() has been called.
  void WaitUntilRaised() EXCLUDES(mu_);

 private:
  std::atomic<bool> raised_{false};
  Mutex mu_;
  CondVar raised_cv_;
};

// Asks an Interrupt every `every` calls of Poll, so that a loop pays one
// increment per step and a virtual call per `every` steps.
class InterruptPoller {
 public:
  // `interrupt` may be null (never interrupted); `what` names the work in
  // the Cancelled message.
  InterruptPoller(const Interrupt* interrupt, std::string what,
                  uint32_t every = 64)
      : interrupt_(interrupt), what_(std::move(what)), every_(every) {}

  // Returns Cancelled ("<what> was stopped: its result is no longer
  // wanted") once the interrupt is requested, as seen at every `every`-th
  // call; OK otherwise.
  Status Poll();

 private:
  const Interrupt* const interrupt_;
  const std::string what_;
  const uint32_t every_;
  uint32_t count_ = 0;
  bool stopped_ = false;
};

}  // namespace kvault

#endif  // KVAULT_CORE_INTERRUPT_H_
