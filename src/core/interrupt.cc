#include "core/interrupt.h"

#include "core/reasons.h"

namespace kvault {

void CancelFlag::Raise() {
  MutexLock lock(&mu_);
  raised_.store(true, std::memory_order_release);
  raised_cv_.SignalAll();
}

void CancelFlag::WaitUntilRaised() {
  MutexLock lock(&mu_);
  raised_cv_.Wait(&mu_, [this] { return Requested(); });
}

Status InterruptPoller::Poll() {
  if (interrupt_ == nullptr) return Status::Ok();
  if (!stopped_ && ++count_ >= every_) {
    count_ = 0;
    stopped_ = interrupt_->Requested();
  }
  if (!stopped_) return Status::Ok();
  return CancelledError(what_ + " was stopped: its result is no longer wanted")
      .WithReason(kReasonCancelled);
}

}  // namespace kvault
