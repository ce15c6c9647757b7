// kvault's HTTP/1.1 message types: what the connection layer hands a route
// handler (HttpRequest) and what the handler fills in (HttpResponse), either
// a whole body or a chunked stream pumped by the connection.
#ifndef KVAULT_SERVER_HTTP_MESSAGE_H_
#define KVAULT_SERVER_HTTP_MESSAGE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvault {

// Size limits on one request.
struct HttpLimits {
  size_t max_head_bytes = 32 << 10;    // request line + headers (431 above)
  size_t max_headers = 100;            // header fields (431 above)
  uint64_t max_body_bytes = 8u << 20;  // decoded body (413 above)
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Returns true when `a` and `b` are equal ignoring ASCII case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Returns the percent-decoded `text`; with `plus_is_space` (query strings)
// '+' becomes ' '. A '%' not followed by two hex digits is kept as is.
std::string PercentDecode(std::string_view text, bool plus_is_space);

// How a handler's wait for an event ended (HttpRequest::Wait,
// ChunkSink::Wait).
enum class WaitResult { kReady, kClientGone, kStopping, kTimedOut };
// What a wait watches besides the handler's own descriptor.
struct WaitAlso {
  bool client_gone = true;  // the client hung up
  bool stopping = true;     // the server is stopping
};
using WaitClock = std::chrono::steady_clock;
// A wait without a deadline.
inline constexpr WaitClock::time_point kNoDeadline =
    WaitClock::time_point::max();
// Blocks until `fd` polls readable, or (as `also` asks) the client hangs up
// or the server stops, or `deadline` passes; the first of those that holds,
// in the order stopping, client gone, ready.
using EventWait = std::function<WaitResult(int fd, WaitAlso also,
                                           WaitClock::time_point deadline)>;
// The wait of a request or stream without a connection (tests build them
// by hand): `fd` and the deadline only.
WaitResult WaitForFd(int fd, WaitClock::time_point deadline);
// Returns poll()'s timeout for `deadline`: ms left rounded up, in
// [0, 2^30].
int PollTimeoutMs(WaitClock::time_point deadline);

struct HttpRequest {
  std::string method;     // "GET", "POST", ... (case-sensitive, RFC 9110)
  std::string target;     // as sent: "/slots/0?action=save"
  std::string path;       // the target's path, percent-decoded
  std::string query;      // the raw text after '?', "" when none
  int version_minor = 1;  // HTTP/1.<minor>
  HttpHeaders headers;    // in arrival order, names as sent
  std::string body;       // decoded (de-chunked) body
  // The route pattern's sub-matches; [0] is the whole path.
  std::vector<std::string> matches;
  // The connection's EventWait (empty in tests that build requests by
  // hand): a long request waits on it, so it stops early when the client
  // hangs up or the server stops.
  EventWait wait;

  // Returns the first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  // Returns true when a header named `name` is present.
  bool HasHeader(std::string_view name) const;
  // Returns the decoded value of the first query parameter `name`, or "".
  std::string Param(std::string_view name) const;
  // Waits as EventWait says (WaitForFd when `wait` is empty).
  WaitResult Wait(int fd, WaitAlso also, WaitClock::time_point deadline) const {
    return wait ? wait(fd, also, deadline) : WaitForFd(fd, deadline);
  }
};

// Where a streamed response's pieces go; implemented by the connection.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Sends `data` as one chunk; returns false when the client is gone (or
  // too slow): the stream must end.
  virtual bool Write(std::string_view data) = 0;
  // Marks the stream complete: the connection sends the terminating chunk.
  virtual void Done() = 0;
  // Waits as EventWait says, on the stream's connection; this default has
  // no connection (WaitForFd).
  virtual WaitResult Wait(int fd, WaitAlso also,
                          WaitClock::time_point deadline) {
    return WaitForFd(fd, deadline);
  }
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // extra headers (Content-Type and framing excluded)
  std::string content_type;
  std::string body;
  // Streamed responses: the connection calls `pump` until it returns false
  // (abort: the connection is closed without a terminating chunk) or the
  // pump calls sink.Done(). A pump that waits does so with sink.Wait, which
  // also wakes when the server stops; then the pump writes its last event
  // and calls Done.
  std::function<bool(ChunkSink& sink)> pump;
  // Runs once after streaming ended, however it ended; `completed` is true
  // when Done was called and the terminating chunk went out.
  std::function<void(bool completed)> on_stream_end;
  // The connection is closed after this response (the request's body was
  // not read, or the handler asked for it).
  bool close_connection = false;

  // Sets a whole body with its content type.
  void SetContent(std::string text, std::string type);
  // Adds or replaces header `name`.
  void SetHeader(const std::string& name, std::string value);
  // Returns header `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_MESSAGE_H_
