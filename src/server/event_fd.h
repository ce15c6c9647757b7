// EventFd: an owned eventfd(2) descriptor, the signal another thread (the
// engine) raises for an HTTP worker that polls it together with its
// connection (http_message.h's EventWait).
#ifndef KVAULT_SERVER_EVENT_FD_H_
#define KVAULT_SERVER_EVENT_FD_H_

#include <string_view>

#include "core/status_or.h"

namespace kvault {

class EventFd {
 public:
  // Returns a non-blocking eventfd; Unavailable (reason out_of_descriptors,
  // naming `what` it was for) when the process has no descriptor left.
  static StatusOr<EventFd> Create(std::string_view what);
  // Closes the descriptor.
  ~EventFd();
  // Movable (the moved-from object owns nothing), not copyable.
  EventFd(EventFd&& other) noexcept;
  EventFd& operator=(EventFd&& other) noexcept;
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  // Returns the descriptor, which polls readable from Signal to Clear.
  int fd() const { return fd_; }
  // Makes fd() readable. Thread-safe, never blocks.
  void Signal() const;
  // Makes fd() unreadable until the next Signal.
  void Clear() const;

 private:
  explicit EventFd(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_EVENT_FD_H_
