#include "server/http_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvault {
namespace {

using std::chrono::milliseconds;

Status SocketError(const char* what) {
  const int err = errno;
  if (err == EPIPE || err == ECONNRESET) {
    return UnavailableError(std::string(what) + ": the client went away")
        .WithReason(kReasonClientClosed);
  }
  return IOError(std::string(what) + ": " + std::strerror(err))
      .WithReason(kReasonIoError);
}

}  // namespace

StopSignal::~StopSignal() {
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
}

Status StopSignal::Init() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return IOError(std::string("pipe: ") + std::strerror(errno));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  return Status::Ok();
}

void StopSignal::Trigger(milliseconds grace) {
  cutoff_.store((HttpClock::now() + grace).time_since_epoch().count());
  stopping_.store(true);
  const char byte = 1;
  // The pipe is never drained: it stays readable for every poller.
  [[maybe_unused]] ssize_t n = write(write_fd_, &byte, 1);
}

HttpClock::time_point StopSignal::Cut(HttpClock::time_point deadline) const {
  if (!stopping()) return deadline;
  const HttpClock::time_point cutoff{HttpClock::duration(cutoff_.load())};
  return std::min(deadline, cutoff);
}

HttpSocket::HttpSocket(int fd, const StopSignal* stop) : fd_(fd), stop_(stop) {
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

WaitResult HttpSocket::WaitFor(int fd, WaitAlso also,
                               HttpClock::time_point deadline) const {
  while (true) {
    // poll() skips negative descriptors: what `also` leaves out.
    pollfd fds[3] = {{also.stopping ? stop_->fd() : -1, POLLIN, 0},
                     {also.client_gone ? fd_ : -1, POLLRDHUP, 0},
                     {fd, POLLIN, 0}};
    const int ready = poll(fds, 3, PollTimeoutMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (fds[0].revents != 0) return WaitResult::kStopping;
    if ((fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      return WaitResult::kClientGone;
    }
    // A poll error on the caller's own descriptor cannot be waited out:
    // "ready" makes the caller look at its source again.
    if (fds[2].revents != 0 || ready < 0) return WaitResult::kReady;
    if (HttpClock::now() >= deadline) return WaitResult::kTimedOut;
  }
}

HttpSocket::~HttpSocket() {
  if (fd_ >= 0) close(fd_);
}

int HttpSocket::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Status HttpSocket::ReadSome(std::string* out, HttpClock::time_point deadline) {
  while (true) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
    const int ready = poll(fds, 2, PollTimeoutMs(deadline));
    if (ready < 0 && errno != EINTR) return SocketError("poll");
    if (fds[1].revents != 0) {
      return CancelledError("the server is stopping")
          .WithReason(kReasonServerStopping);
    }
    if (ready == 0 && HttpClock::now() >= deadline) {
      return UnavailableError("the client sent nothing in time")
          .WithReason(kReasonRequestTimeout);
    }
    if (fds[0].revents == 0) continue;
    char buf[64 << 10];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      return Status::Ok();
    }
    if (n == 0) {
      return UnavailableError("the client closed the connection")
          .WithReason(kReasonClientClosed);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return SocketError("recv");
    }
  }
}

Status HttpSocket::WriteAll(std::string_view data,
                            HttpClock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return SocketError("send");
    }
    // Until the server stops, its signal wakes the wait too, so that the
    // stop's shorter cut applies at once.
    const HttpClock::time_point cut = stop_->Cut(deadline);
    if (HttpClock::now() >= cut) {
      return UnavailableError("the client did not read the response in time")
          .WithReason(kReasonWriteTimeout);
    }
    pollfd fds[2] = {{fd_, POLLOUT, 0},
                     {stop_->stopping() ? -1 : stop_->fd(), POLLIN, 0}};
    if (poll(fds, 2, PollTimeoutMs(cut)) < 0 && errno != EINTR) {
      return SocketError("poll");
    }
  }
  return Status::Ok();
}

void HttpSocket::CloseGracefully(milliseconds linger, size_t max) {
  shutdown(fd_, SHUT_WR);
  const HttpClock::time_point deadline = HttpClock::now() + linger;
  size_t discarded = 0;
  while (discarded < max) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
    if (poll(fds, 2, PollTimeoutMs(deadline)) <= 0 || fds[1].revents != 0)
      break;
    char buf[16 << 10];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) break;
    discarded += static_cast<size_t>(n);
  }
  close(fd_);
  fd_ = -1;
}

}  // namespace kvault
