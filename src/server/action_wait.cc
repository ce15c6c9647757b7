#include "server/action_wait.h"

#include <chrono>

#include "core/reasons.h"

namespace kvault {
namespace {

// How long a stopping server still waits for an action that is under way
// (a save finishing its write), so that its client gets the answer.
constexpr std::chrono::milliseconds kStopGrace{10000};

}  // namespace

Status WaitForActionReply(const HttpRequest& req, int fd) {
  WaitClock::time_point deadline = kNoDeadline;
  bool stopping = false;
  while (true) {
    const WaitAlso also{.client_gone = true, .stopping = !stopping};
    switch (req.Wait(fd, also, deadline)) {
      case WaitResult::kReady:
        return Status::Ok();
      case WaitResult::kClientGone:
        return CancelledError(
                   "the client closed the connection before the slot "
                   "action finished; it still runs to its end")
            .WithReason(kReasonClientClosed);
      case WaitResult::kStopping:
        stopping = true;
        deadline = WaitClock::now() + kStopGrace;
        break;
      case WaitResult::kTimedOut:
        return UnavailableError(
                   "server is stopping; the slot action did not finish in "
                   "time")
            .WithReason(kReasonServerStopping);
    }
  }
}

}  // namespace kvault
