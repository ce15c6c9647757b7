#include "server/http_message.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace kvault {

int PollTimeoutMs(WaitClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - WaitClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
}

WaitResult WaitForFd(int fd, WaitClock::time_point deadline) {
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, PollTimeoutMs(deadline));
    if (ready > 0) return WaitResult::kReady;
    if (ready < 0 && errno == EINTR) continue;
    // An error polling a descriptor the caller owns cannot be waited out;
    // "ready" makes the caller look at its source again.
    if (ready < 0) return WaitResult::kReady;
    if (WaitClock::now() >= deadline) return WaitResult::kTimedOut;
  }
}

namespace {

// Returns the value of hex digit `c`, or -1.
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char LowerAscii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      out +=
          static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string HttpRequest::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

bool HttpRequest::HasHeader(std::string_view name) const {
  for (const auto& header : headers) {
    if (EqualsIgnoreCase(header.first, name)) return true;
  }
  return false;
}

std::string HttpRequest::Param(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? "" : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (PercentDecode(pair.substr(0, eq), true) != name) continue;
    if (eq == std::string_view::npos) return "";
    return PercentDecode(pair.substr(eq + 1), true);
  }
  return "";
}

void HttpResponse::SetContent(std::string text, std::string type) {
  body = std::move(text);
  content_type = std::move(type);
}

void HttpResponse::SetHeader(const std::string& name, std::string value) {
  for (auto& header : headers) {
    if (EqualsIgnoreCase(header.first, name)) {
      header.second = std::move(value);
      return;
    }
  }
  headers.emplace_back(name, std::move(value));
}

std::string HttpResponse::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

}  // namespace kvault
