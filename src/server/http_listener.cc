#include "server/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvault {
namespace {

using std::chrono::milliseconds;

// How long a rejected connection is drained before it is closed, and how
// many may linger at once (beyond that they are closed at once).
constexpr milliseconds kRejectLinger{500};
constexpr size_t kMaxLingering = 256;
// How many accepted connections may wait for their first bytes at once;
// beyond that a new one is closed at once (the descriptor limit is raised
// well above this at start-up).
constexpr size_t kMaxWaiting = 8192;
// How long accepting pauses when the process is out of descriptors.
constexpr milliseconds kAcceptPause{100};

std::string RequestTimeoutResponse() {
  HttpResponse res;
  SetErrorResponse(MakeHttpError(408, kErrInvalidRequest,
                                 "the request head did not arrive in time",
                                 "request_timeout"),
                   res);
  return ResponseHead(res, 1, false) + res.body;
}

std::string TooManyConnectionsResponse() {
  HttpResponse res;
  SetErrorResponse(
      MakeHttpError(503, kErrUnavailable,
                    "too many connections: every HTTP worker is busy; retry "
                    "later",
                    kReasonTooManyConnections),
      res);
  res.SetHeader("Retry-After", "1");
  return ResponseHead(res, 1, false) + res.body;
}

// Returns a socket bound to host:port and listening, or the error.
StatusOr<int> BindSocket(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0) {
    return InvalidArgumentError("cannot resolve host '" + host + "'");
  }
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return UnavailableError("cannot listen on " + host + ":" +
                            std::to_string(port) +
                            " (address in use or not local?)")
        .WithReason(kReasonBindFailed);
  }
  return fd;
}

uint16_t BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

// Raises the soft descriptor limit to the hard one: each waiting or served
// connection holds a descriptor, and the usual soft limit (1024) is below
// kMaxWaiting.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    const ListenerOptions& options, const HttpCallbacks* callbacks) {
  if (options.host.empty()) return InvalidArgumentError("server host is empty");
  std::unique_ptr<HttpListener> l(new HttpListener(options, callbacks));
  l->options_.max_connections = std::max<uint32_t>(1, options.max_connections);
  KV_RETURN_IF_ERROR(l->stop_.Init());
  KV_ASSIGN_OR_RETURN(EventFd worker_freed,
                      EventFd::Create("the HTTP listener's wake-up"));
  l->worker_freed_.emplace(std::move(worker_freed));
  RaiseDescriptorLimit();
  KV_RETURN_IF_ERROR(l->Bind());
  for (uint32_t i = 0; i < l->options_.max_connections; ++i) {
    l->workers_.emplace_back([p = l.get()] { p->WorkerLoop(); });
  }
  l->acceptor_ = std::thread([p = l.get()] { p->AcceptLoop(); });
  return l;
}

Status HttpListener::Bind() {
  KV_ASSIGN_OR_RETURN(listen_fd_, BindSocket(options_.host, options_.port));
  port_ = BoundPort(listen_fd_);
  return Status::Ok();
}

HttpListener::~HttpListener() { Stop(milliseconds(0)); }

void HttpListener::Stop(milliseconds grace) {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stop_.Trigger(grace);
  if (acceptor_.joinable()) acceptor_.join();
  {
    // Under the lock: a worker between its stopping() check and its wait
    // would otherwise miss this wake-up.
    MutexLock lock(&mu_);
    cv_.SignalAll();
  }
  for (std::thread& t : workers_) t.join();
  {
    MutexLock lock(&mu_);
    for (const Ready& r : queue_) close(r.fd);
    queue_.clear();
    for (int fd : parked_) close(fd);
    parked_.clear();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void HttpListener::AcceptLoop() {
  while (true) {
    // Out of descriptors: stop polling the listener for a moment rather
    // than spin on a socket that stays readable.
    const bool paused = HttpClock::now() < accept_paused_until_;
    std::vector<pollfd> fds = {
        {listen_fd_, static_cast<short>(paused ? 0 : POLLIN), 0},
        {stop_.fd(), POLLIN, 0},
        {worker_freed_->fd(), POLLIN, 0}};
    constexpr size_t kFirstClient = 3;
    HttpClock::time_point next = NextPendingDeadline(
        HttpClock::now() + (paused ? kAcceptPause : milliseconds(1000)));
    for (const Lingering& l : lingering_) {
      fds.push_back({l.fd, POLLIN, 0});
      next = std::min(next, l.until);
    }
    for (const Waiting& w : waiting_) {
      fds.push_back({w.fd, POLLIN, 0});
      next = std::min(next, w.until);
    }
    const auto wait =
        std::chrono::duration_cast<milliseconds>(next - HttpClock::now());
    poll(fds.data(), fds.size(),
         static_cast<int>(std::max<int64_t>(0, wait.count() + 1)));
    if (fds[1].revents != 0) break;
    std::vector<bool> readable;  // lingering, then waiting
    for (size_t i = kFirstClient; i < fds.size(); ++i) {
      readable.push_back(fds[i].revents != 0);
    }
    const auto first_waiting =
        readable.begin() + static_cast<std::ptrdiff_t>(lingering_.size());
    const std::vector<bool> waiting_readable(first_waiting, readable.end());
    readable.erase(first_waiting, readable.end());
    DrainLingering(readable);
    DispatchWaiting(waiting_readable);
    if (fds[2].revents != 0) TakeParked();
    DispatchPending();
    if (fds[0].revents != 0) AcceptReady();
  }
  for (const Pending& p : pending_) close(p.ready.fd);
  pending_.clear();
  for (const Lingering& l : lingering_) close(l.fd);
  lingering_.clear();
  for (const Waiting& w : waiting_) close(w.fd);
  waiting_.clear();
}

void HttpListener::AcceptReady() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {  // EAGAIN (all taken), or an error
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        accept_paused_until_ = HttpClock::now() + kAcceptPause;
      }
      return;
    }
    if (waiting_.size() >= kMaxWaiting) {
      close(fd);
      continue;
    }
    waiting_.push_back(
        {fd, HttpClock::now() + options_.connection.head_timeout, ""});
  }
}

void HttpListener::TakeParked() {
  worker_freed_->Clear();
  std::vector<int> parked;
  {
    MutexLock lock(&mu_);
    parked.swap(parked_);
  }
  const HttpClock::time_point until =
      HttpClock::now() + options_.connection.idle_timeout;
  for (int fd : parked) {
    if (waiting_.size() >= kMaxWaiting) {
      close(fd);
    } else {
      waiting_.push_back({fd, until, "", /*idle=*/true});
    }
  }
}

void HttpListener::DispatchWaiting(const std::vector<bool>& readable) {
  // A complete head (or one at the size limit: the worker answers 431) goes
  // to a worker, or gets a fast 503; past the head deadline a connection
  // gets 408 (silent ones are just closed).
  std::vector<Waiting> keep;
  const HttpClock::time_point now = HttpClock::now();
  for (size_t i = 0; i < waiting_.size(); ++i) {
    Waiting& w = waiting_[i];
    if (i < readable.size() && readable[i] && !ReadWaiting(w)) {
      close(w.fd);
      continue;
    }
    if (w.idle && !w.received.empty()) {
      // The next request began: its head has head_timeout from now.
      w.idle = false;
      w.until = now + options_.connection.head_timeout;
    }
    if (w.received.find("\r\n\r\n") != std::string::npos ||
               w.received.size() >= options_.connection.limits.max_head_bytes) {
      Dispatch({w.fd, std::move(w.received)});
    } else if (now < w.until) {
      keep.push_back(std::move(w));
    } else if (w.received.empty()) {
      close(w.fd);
    } else {
      static const std::string kTimeout = RequestTimeoutResponse();
      Refuse(w.fd, kTimeout);
    }
  }
  waiting_ = std::move(keep);
}

bool HttpListener::ReadWaiting(Waiting& w) {
  char buf[4096];
  const ssize_t n = recv(w.fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n > 0) {
    w.received.append(buf, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

void HttpListener::Dispatch(Ready ready) {
  pending_.push_back(
      {std::move(ready), HttpClock::now() + options_.worker_wait});
}

void HttpListener::DispatchPending() {
  size_t num_taken = 0;
  {
    MutexLock lock(&mu_);
    while (num_taken < pending_.size() && busy_ < options_.max_connections) {
      ++busy_;
      queue_.push_back(std::move(pending_[num_taken].ready));
      ++num_taken;
    }
  }
  for (size_t i = 0; i < num_taken; ++i) cv_.Signal();
  pending_.erase(pending_.begin(),
                 pending_.begin() + static_cast<std::ptrdiff_t>(num_taken));
  const HttpClock::time_point now = HttpClock::now();
  while (!pending_.empty() && pending_.front().until <= now) {
    Reject(pending_.front().ready.fd);
    pending_.pop_front();
  }
}

HttpClock::time_point HttpListener::NextPendingDeadline(
    HttpClock::time_point bound) const {
  // Deadlines grow along the queue: the first one is the earliest.
  return pending_.empty() ? bound : std::min(bound, pending_.front().until);
}

void HttpListener::Reject(int fd) {
  static const std::string kResponse = TooManyConnectionsResponse();
  Refuse(fd, kResponse);
}

void HttpListener::Refuse(int fd, const std::string& response) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  // A fresh socket's send buffer takes the small answer at once.
  [[maybe_unused]] ssize_t n =
      send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  if (lingering_.size() >= kMaxLingering) {
    close(fd);
    return;
  }
  lingering_.push_back({fd, HttpClock::now() + kRejectLinger});
}

void HttpListener::DrainLingering(const std::vector<bool>& readable) {
  std::vector<Lingering> keep;
  const HttpClock::time_point now = HttpClock::now();
  for (size_t i = 0; i < lingering_.size(); ++i) {
    const Lingering& l = lingering_[i];
    bool open = now < l.until;
    if (open && i < readable.size() && readable[i]) {
      char buf[4096];
      open = recv(l.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;
    }
    if (open) {
      keep.push_back(l);
    } else {
      close(l.fd);
    }
  }
  lingering_ = std::move(keep);
}

void HttpListener::WorkerLoop() {
  while (true) {
    Ready ready;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_, [this]() REQUIRES(mu_) {
        return !queue_.empty() || stop_.stopping();
      });
      if (queue_.empty()) return;
      ready = std::move(queue_.front());
      queue_.pop_front();
    }
    const int idle_fd = HttpConnection(ready.fd, options_.connection,
                                       *callbacks_, &stop_, ready.received)
                            .Serve();
    {
      MutexLock lock(&mu_);
      --busy_;
      if (idle_fd >= 0 && stop_.stopping()) {
        close(idle_fd);
      } else if (idle_fd >= 0) {
        parked_.push_back(idle_fd);
      }
      worker_freed_->Signal();
    }
    // After the release: a request waiting for a worker need not wait
    // for the trim.
    trimmer_.MaybeTrim();
  }
}

}  // namespace kvault
