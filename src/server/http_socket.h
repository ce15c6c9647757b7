// One client connection's socket with deadlines: every read and write waits
// with poll() until its deadline, reads also wake when the server stops
// (StopSignal), so no client can hold a thread past the limits the server
// sets, and Stop never waits on a silent client.
#ifndef KVAULT_SERVER_HTTP_SOCKET_H_
#define KVAULT_SERVER_HTTP_SOCKET_H_

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/http_message.h"

namespace kvault {

using HttpClock = std::chrono::steady_clock;

// The server-wide stop flag, pollable: a pipe that becomes readable (and
// stays so) when the server stops.
class StopSignal {
 public:
  StopSignal() = default;
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // Creates the pipe; IOError when the OS refuses.
  Status Init();
  // Marks the server stopping; writes still in progress or started later
  // get until now + `grace` (their own deadline when earlier).
  void Trigger(std::chrono::milliseconds grace);
  // Returns true once Trigger ran.
  bool stopping() const { return stopping_.load(); }
  // Returns the descriptor that polls readable once stopping.
  int fd() const { return read_fd_; }
  // Returns `deadline`, cut to the stop grace once stopping.
  HttpClock::time_point Cut(HttpClock::time_point deadline) const;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<HttpClock::rep> cutoff_{0};  // time_since_epoch ticks
};

class HttpSocket {
 public:
  // Takes ownership of connected socket `fd` (made non-blocking).
  HttpSocket(int fd, const StopSignal* stop);
  // Closes the socket (abruptly; see CloseGracefully).
  ~HttpSocket();
  HttpSocket(const HttpSocket&) = delete;
  HttpSocket& operator=(const HttpSocket&) = delete;

  // Appends what the client sent (up to 64 KiB) to *out, waiting until
  // `deadline`. Errors carry reasons: "request_timeout" (deadline passed),
  // "server_stopping", "client_closed" (EOF), "io_error".
  Status ReadSome(std::string* out, HttpClock::time_point deadline);
  // Sends all of `data` by `deadline` (cut short when the server stops);
  // errors: "write_timeout", "client_closed", "io_error".
  Status WriteAll(std::string_view data, HttpClock::time_point deadline);
  // The connection's EventWait (http_message.h): blocks until `fd` is
  // readable, the client closed its side or the connection failed, or the
  // server stops (as `also` asks), or `deadline`. Consumes no data.
  WaitResult WaitFor(int fd, WaitAlso also,
                     HttpClock::time_point deadline) const;
  // Sends FIN, then discards what the client still sends (at most `max`
  // bytes, until `linger` passed or the server stops) before closing, so
  // the client reads the response instead of a reset caused by unread input.
  void CloseGracefully(std::chrono::milliseconds linger, size_t max);
  // Gives up ownership: returns the descriptor, still open, which the
  // destructor then leaves alone.
  int Release();

 private:
  int fd_;
  const StopSignal* stop_;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_SOCKET_H_
