// Serves one client connection: requests are parsed strictly
// (http_request_parser.h), admitted on their head before any body byte is
// read (route, API key), answered in order on a keep-alive connection
// (pipelined requests included: the parser keeps the bytes after a
// request), and streamed responses are framed as chunked transfer. Every
// wait has a deadline (whole head, whole body, write progress) so a slow or
// silent client cannot keep the worker, and a keep-alive connection with
// nothing pending is handed back rather than waited on (the listener's
// event loop holds idle connections, never a worker).
#ifndef KVAULT_SERVER_HTTP_CONNECTION_H_
#define KVAULT_SERVER_HTTP_CONNECTION_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "server/http_error.h"
#include "server/http_message.h"
#include "server/http_request_parser.h"
#include "server/http_socket.h"

namespace kvault {

struct ConnectionOptions {
  HttpLimits limits;
  // The whole request head must arrive within this (from the connection's
  // start, or from the first byte of a keep-alive request).
  std::chrono::milliseconds head_timeout{10000};
  // The whole body must arrive within this after the head.
  std::chrono::milliseconds body_timeout{30000};
  // A keep-alive connection waits this long for its next request (in the
  // listener's event loop).
  std::chrono::milliseconds idle_timeout{5000};
  // A write that makes no progress for this long drops the client.
  std::chrono::milliseconds write_timeout{60000};
};

struct HttpCallbacks {
  // Decides on a request whose head arrived, before its body is read:
  // returns true to go on, or false with `res` set to the refusal.
  std::function<bool(const HttpRequest& head, HttpResponse& res)> admit;
  // Answers a complete request (body read).
  std::function<void(HttpRequest& req, HttpResponse& res)> handle;
};

// Returns `res` set to the JSON error body of `error`.
void SetErrorResponse(const HttpError& error, HttpResponse& res);
// Returns the status line, headers and blank line of `res` (kvault's
// Server header, Content-Length or chunked framing, Connection: close when
// `keep_alive` is false).
std::string ResponseHead(const HttpResponse& res, int version_minor,
                         bool keep_alive);

class HttpConnection {
 public:
  // Serves socket `fd` (owned) with `callbacks`; `stop` wakes it when the
  // server stops. `received` holds bytes already read from `fd` (the
  // listener reads request heads before handing a connection over).
  HttpConnection(int fd, const ConnectionOptions& options,
                 const HttpCallbacks& callbacks, const StopSignal* stop,
                 std::string_view received = {});

  // Serves requests until the client or the server ends the connection
  // (then closes it and returns -1), or until the connection is kept alive
  // with no byte of a next request pending: then returns its descriptor,
  // open, for the caller to wait on without a thread.
  int Serve();

 private:
  // Serves one request; returns true to go on with the next one.
  bool ServeOne();
  Status ReadHead();
  Status ReadBody();
  Status ReadMore(HttpClock::time_point deadline);
  // Answers a failed read: the parser's error, or 408 for a timeout after
  // the request began; nothing for a gone client or a stopping server.
  void ReplyToReadError(const Status& status);
  bool Send(HttpResponse& res, bool head_only, int version_minor, bool keep);
  bool Stream(HttpResponse& res, int version_minor);
  HttpClock::time_point WriteDeadline() const;

  ConnectionOptions options_;
  const HttpCallbacks& callbacks_;
  const StopSignal* stop_;
  HttpSocket socket_;
  HttpRequestParser parser_;
  std::string scratch_;
  bool close_gracefully_ = false;  // a final answer went out: linger
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_CONNECTION_H_
