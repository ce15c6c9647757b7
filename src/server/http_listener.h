// The connection server: one acceptor thread and a fixed pool of worker
// threads, one request (or pipelined run of requests) per worker at a time.
// A connection stays on the acceptor's poll set (up to kMaxWaiting of them)
// while its request head arrives, both when new and when kept alive between
// requests (a worker hands an idle keep-alive connection back; it waits
// idle_timeout for its next request, then is closed); the acceptor reads
// the head (non-blocking, within the head deadline, else 408) and hands the
// connection and its bytes to a worker. So connections that send nothing,
// idle keep-alive connections, or a head a byte at a time hold no worker:
// /health keeps answering through thousands of them. When every worker is
// busy, a connection with a request waits for one at most worker_wait (a
// worker that has just written its answer is about to come free: a client
// reading that answer may already have sent its next request), then is
// answered 503 too_many_connections (Connection: close), so a flood costs the
// flood, not the clients behind it. Stop closes idle and
// half-read connections at once and gives streams a short grace to send their
// last event and terminating chunk.
#ifndef KVAULT_SERVER_HTTP_LISTENER_H_
#define KVAULT_SERVER_HTTP_LISTENER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator_tuning.h"
#include "core/mutex.h"
#include "core/status_or.h"
#include "server/event_fd.h"
#include "server/http_connection.h"
#include "server/http_socket.h"

namespace kvault {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;              // 0: any free port
  uint32_t max_connections = 64;  // worker threads
  // How long a request may wait for a busy worker before its 503.
  std::chrono::milliseconds worker_wait{500};
  ConnectionOptions connection;
};

class HttpListener {
 public:
  // Binds host:port (InvalidArgument for a bad host, Unavailable with
  // reason "bind_failed" when the address is taken) and starts the threads;
  // `callbacks` must outlive the listener.
  static StatusOr<std::unique_ptr<HttpListener>> Start(
      const ListenerOptions& options, const HttpCallbacks* callbacks);
  // Stops (see Stop) and joins.
  ~HttpListener();

  // Returns the port actually bound.
  uint16_t port() const { return port_; }
  // Stops accepting, closes connections waiting for input, lets responses
  // in progress write for at most `grace` more, and joins every thread.
  // Idempotent.
  void Stop(std::chrono::milliseconds grace) EXCLUDES(stop_mu_, mu_);

 private:
  struct Lingering {
    int fd;
    HttpClock::time_point until;
  };
  // An accepted connection whose request head has not fully arrived.
  struct Waiting {
    int fd;
    HttpClock::time_point until;
    std::string received;  // the head so far
    // Kept alive after a request and silent since: `until` is the idle
    // deadline, and the head deadline starts with the first byte.
    bool idle = false;
  };
  // A connection for a worker, with the bytes already read from it.
  struct Ready {
    int fd;
    std::string received;
  };
  // A Ready connection that found every worker busy, until its 503.
  struct Pending {
    Ready ready;
    HttpClock::time_point until;
  };
  HttpListener(const ListenerOptions& options, const HttpCallbacks* callbacks)
      : options_(options), callbacks_(callbacks) {}
  Status Bind();
  void AcceptLoop();
  void AcceptReady();
  // Reads what `w` has sent; returns false when it is to be closed.
  bool ReadWaiting(Waiting& w);
  // Queues `ready` for a worker (behind the ones already pending).
  void Dispatch(Ready ready);
  // Hands pending connections to free workers, oldest first; answers the
  // ones past their wait 503.
  void DispatchPending() EXCLUDES(mu_);
  // Answers 503 too_many_connections and closes `fd` after a short linger.
  void Reject(int fd);
  // Sends `response` (best effort), then lingers and closes `fd`.
  void Refuse(int fd, const std::string& response);
  void DrainLingering(const std::vector<bool>& readable);
  void DispatchWaiting(const std::vector<bool>& readable);
  // Moves the connections workers handed back onto the poll set.
  void TakeParked() EXCLUDES(mu_);
  // The earliest deadline among pending connections, or `bound`.
  HttpClock::time_point NextPendingDeadline(HttpClock::time_point bound) const;
  void WorkerLoop() EXCLUDES(mu_);

  ListenerOptions options_;
  const HttpCallbacks* callbacks_;
  StopSignal stop_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::vector<Lingering> lingering_;           // acceptor thread only
  std::vector<Waiting> waiting_;               // acceptor thread only
  std::deque<Pending> pending_;                // acceptor thread only
  HttpClock::time_point accept_paused_until_;  // acceptor thread only
  Mutex mu_;
  CondVar cv_;
  std::deque<Ready> queue_ GUARDED_BY(mu_);  // not yet taken by a worker
  uint32_t busy_ GUARDED_BY(mu_) = 0;        // queued + being served
  // Idle keep-alive connections handed back by workers, for the acceptor.
  std::vector<int> parked_ GUARDED_BY(mu_);
  // Wakes the acceptor when a worker comes free (and maybe parked one).
  std::optional<EventFd> worker_freed_;
  // Hands what requests freed back to the system, a few times a second.
  MemoryTrimmer trimmer_{std::chrono::milliseconds(200)};
  Mutex stop_mu_;                            // serialises Stop
  bool stopped_ GUARDED_BY(stop_mu_) = false;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_LISTENER_H_
