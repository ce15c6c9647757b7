// Test helpers for the remote prefix-store tier: a real redis-server child
// process on a free 127.0.0.1 port (ready when it says so on stdout, no
// sleeps), and FlakyProxy, a TCP relay in front of it that can drop every
// connection after some bytes, as a flapping network or proxy would.
#ifndef KVAULT_TESTS_KV_REDIS_TEST_SERVER_H_
#define KVAULT_TESTS_KV_REDIS_TEST_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kvault::redis_test {

// Returns a port that was free a moment ago on 127.0.0.1.
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Returns a socket listening on a free 127.0.0.1 port, and the port.
inline std::pair<int, int> ListenOnFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return {-1, -1};
  }
  return {fd, ntohs(addr.sin_port)};
}

// A redis-server child process without persistence.
class RedisServer {
 public:
  // Starts redis-server on `port` (a free one when 0); returns null when it
  // does not start (e.g. not installed: scripts/install-deps installs it).
  static std::unique_ptr<RedisServer> Start(int port = 0) {
    auto server = std::unique_ptr<RedisServer>(new RedisServer);
    server->port_ = port != 0 ? port : FreePort();
    if (!server->Spawn()) return nullptr;
    return server;
  }
  ~RedisServer() { Kill(SIGKILL); }

  int port() const { return port_; }
  std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
  }
  // Stops the server (SIGKILL: its data is gone).
  void Kill(int sig = SIGKILL) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Starts it again on the same port, empty.
  bool Restart() {
    Kill();
    return Spawn();
  }
  // Freezes (SIGSTOP) or thaws (SIGCONT) the server: a store that hangs.
  void Freeze(bool frozen) {
    if (pid_ > 0) kill(pid_, frozen ? SIGSTOP : SIGCONT);
  }
  // Runs redis-cli against the server; returns its stdout.
  std::string Cli(const std::string& args) const {
    const std::string cmd =
        "redis-cli -p " + std::to_string(port_) + " " + args + " 2>/dev/null";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
      pclose(p);
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  RedisServer() = default;

  // Starts the child and waits for its "Ready to accept connections".
  bool Spawn() {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      const std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "no", nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string log;
    char buf[1024];
    ssize_t n;
    bool ready = false;
    while (!ready && (n = read(fds[0], buf, sizeof(buf))) > 0) {
      log.append(buf, n);
      ready = log.find("Ready to accept connections") != std::string::npos;
    }
    // Keep draining its output so that it never blocks on a full pipe.
    std::thread([fd = fds[0]] {
      char sink[1024];
      while (read(fd, sink, sizeof(sink)) > 0) {
      }
      close(fd);
    }).detach();
    if (!ready) {
      fprintf(stderr, "redis-server did not start:\n%s\n", log.c_str());
      Kill();
    }
    return ready;
  }

  int port_ = 0;
  pid_t pid_ = -1;
};

// A TCP relay to 127.0.0.1:`upstream` that, while `drop_after_bytes` > 0,
// closes each connection once that many bytes have passed through it.
class FlakyProxy {
 public:
  explicit FlakyProxy(int upstream) : upstream_(upstream) {
    auto [fd, port] = ListenOnFreePort();
    listen_fd_ = fd;
    port_ = port;
    thread_ = std::thread([this] { Accept(); });
  }
  ~FlakyProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    thread_.join();
    for (std::thread& t : relays_) t.join();
  }

  int port() const { return port_; }
  std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(port_);
  }
  // 0: relay faithfully.
  std::atomic<uint64_t> drop_after_bytes{0};
  // Connections accepted and connections dropped on purpose.
  std::atomic<uint64_t> num_accepted{0};
  std::atomic<uint64_t> num_dropped{0};

 private:
  void Accept() {
    while (!stop_) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      ++num_accepted;
      relays_.emplace_back([this, client] { Relay(client); });
    }
  }
  void Relay(int client) {
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(upstream_));
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
        0) {
      Pump(client, server);
    }
    close(server);
    close(client);
  }
  void Pump(int client, int server) {
    uint64_t passed = 0;
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 100) < 0) return;
      for (int i = 0; i < 2; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof(buf));
        if (n <= 0) return;
        const uint64_t limit = drop_after_bytes;
        if (limit > 0 && passed + n >= limit) {
          ++num_dropped;
          return;  // the connection breaks mid-stream
        }
        passed += n;
        const int to = i == 0 ? server : client;
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = write(to, buf + off, n - off);
          if (w <= 0) return;
          off += w;
        }
      }
    }
  }

  int upstream_;
  int listen_fd_ = -1;
  int port_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> relays_;
};

}  // namespace kvault::redis_test

#endif  // KVAULT_TESTS_KV_REDIS_TEST_SERVER_H_
