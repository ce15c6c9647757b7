#include "server/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "core/reasons.h"

namespace kvault {

StatusOr<EventFd> EventFd::Create(std::string_view what) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    return UnavailableError("cannot create the " + std::string(what) +
                            "'s event descriptor: " + std::strerror(errno))
        .WithReason(kReasonOutOfDescriptors);
  }
  return EventFd(fd);
}

EventFd::~EventFd() {
  if (fd_ >= 0) close(fd_);
}

EventFd::EventFd(EventFd&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

EventFd& EventFd::operator=(EventFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void EventFd::Signal() const {
  // The counter cannot reach its limit (2^64 - 2): every waiter clears it.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
}

void EventFd::Clear() const {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof(count));
}

}  // namespace kvault
