// A raw TCP client for HTTP framing tests: it sends exactly the bytes a test
// gives (pipelined, malformed, half-sent) and parses the server's answers
// strictly (status line, headers, Content-Length or chunked body), waiting
// with poll() and a deadline, never with sleeps.
#ifndef KVAULT_TESTS_SERVER_RAW_HTTP_H_
#define KVAULT_TESTS_SERVER_RAW_HTTP_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kvault::testing_http {

using RawClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
  bool chunked = false;
  bool terminated = false;  // chunked: the last chunk and trailers arrived
};

class RawConnection {
 public:
  // Connects to 127.0.0.1:`port`; ok() tells whether it worked.
  explicit RawConnection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }

  // Sends all of `bytes`; false when the server closed or reset.
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Closes this side abruptly (the server sees EOF).
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // Reads one response within `timeout`; nullopt when the connection closed
  // or timed out before a complete head. A chunked body cut short comes
  // back with terminated == false. `no_body`: the answer to a HEAD request.
  std::optional<RawResponse> ReadResponse(milliseconds timeout,
                                          bool no_body = false) {
    const RawClock::time_point deadline = RawClock::now() + timeout;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    RawResponse r;
    if (!ParseHead(buf_.substr(0, end), &r)) return std::nullopt;
    buf_.erase(0, end + 4);
    if (no_body || r.status < 200 || r.status == 204) return r;
    if (r.chunked) {
      ReadChunked(deadline, &r);
    } else if (r.headers.count("content-length")) {
      const size_t n = std::stoul(r.headers["content-length"]);
      while (buf_.size() < n && Fill(deadline)) {
      }
      r.body = buf_.substr(0, n);
      buf_.erase(0, std::min(n, buf_.size()));
    } else {
      while (Fill(deadline)) {
      }
      r.body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }

  // Reads until the received bytes contain `text` (kept for ReadResponse);
  // false on EOF or timeout.
  bool WaitFor(std::string_view text, milliseconds timeout) {
    const RawClock::time_point deadline = RawClock::now() + timeout;
    while (buf_.find(text) == std::string::npos) {
      if (!Fill(deadline)) return false;
    }
    return true;
  }

  // Returns true when the server closes the connection (EOF or reset)
  // within `timeout`; bytes read meanwhile are kept.
  bool WaitClosed(milliseconds timeout) {
    const RawClock::time_point deadline = RawClock::now() + timeout;
    while (true) {
      pollfd p = {fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - RawClock::now());
      if (left.count() < 0 ||
          poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return false;
      }
      char tmp[4096];
      const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return true;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

 private:
  // Reads more bytes; false on EOF, error or deadline.
  bool Fill(RawClock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - RawClock::now());
    pollfd p = {fd_, POLLIN, 0};
    if (left.count() < 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return false;
    }
    char tmp[16384];
    const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  static bool ParseHead(const std::string& head, RawResponse* r) {
    if (head.compare(0, 7, "HTTP/1.") != 0 || head.size() < 12) return false;
    r->status = std::stoi(head.substr(9, 3));
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line = head.substr(pos + 2, next - pos - 2);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) return false;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(c));
      const size_t v = line.find_first_not_of(' ', colon + 1);
      r->headers[name] = v == std::string::npos ? "" : line.substr(v);
      pos = next;
    }
    r->chunked = r->headers["transfer-encoding"] == "chunked";
    return true;
  }

  // Reads chunks until the last one and the trailer section's end.
  void ReadChunked(RawClock::time_point deadline, RawResponse* r) {
    while (true) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (!Fill(deadline)) return;
      }
      const size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
      while (buf_.size() < eol + 2 + size + 2) {
        if (!Fill(deadline)) return;
      }
      if (buf_.compare(eol + 2 + size, 2, "\r\n") != 0) return;  // bad framing
      r->body += buf_.substr(eol + 2, size);
      buf_.erase(0, eol + 2 + size + 2);
      if (size == 0) {
        r->terminated = true;  // (kvault sends no trailers)
        return;
      }
    }
  }

  int fd_ = -1;
  std::string buf_;
};

}  // namespace kvault::testing_http

#endif  // KVAULT_TESTS_SERVER_RAW_HTTP_H_
