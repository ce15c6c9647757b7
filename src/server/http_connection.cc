#include "server/http_connection.h"

#include <cstdio>

namespace kvault {
namespace {

using std::chrono::milliseconds;

// How long a closing connection discards unread input so the client reads
// the answer rather than a reset, and at most how much.
constexpr milliseconds kLinger{500};
constexpr size_t kLingerBytes = 1 << 20;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

// True for the reasons HttpSocket gives (the transport, not the request).
bool IsTransportError(const Status& s) {
  const std::string_view r = s.reason();
  return r == "request_timeout" || r == "server_stopping" ||
         r == "client_closed" || r == "io_error" || r == "write_timeout";
}

// The ChunkSink of a streamed response: chunked framing on HTTP/1.1, raw
// bytes (then close) on HTTP/1.0.
class SocketChunkSink : public ChunkSink {
 public:
  SocketChunkSink(HttpSocket* socket, bool chunked,
                  std::function<HttpClock::time_point()> deadline)
      : socket_(socket), chunked_(chunked), deadline_(std::move(deadline)) {}

  bool Write(std::string_view data) override {
    if (failed_ || data.empty()) return !failed_;
    std::string out;
    if (chunked_) {
      char size[24];
      std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
      out = size;
    }
    out.append(data.data(), data.size());
    if (chunked_) out += "\r\n";
    failed_ = !socket_->WriteAll(out, deadline_()).ok();
    return !failed_;
  }
  void Done() override { done_ = true; }
  WaitResult Wait(int fd, WaitAlso also,
                  HttpClock::time_point deadline) override {
    return socket_->WaitFor(fd, also, deadline);
  }
  bool done() const { return done_; }
  bool failed() const { return failed_; }

 private:
  HttpSocket* socket_;
  bool chunked_;
  std::function<HttpClock::time_point()> deadline_;
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace

void SetErrorResponse(const HttpError& error, HttpResponse& res) {
  res.status = error.http_status;
  res.SetContent(DumpJson(ErrorJson(error)), "application/json; charset=utf-8");
}

std::string ResponseHead(const HttpResponse& res, int version_minor,
                         bool keep_alive) {
  std::string out = "HTTP/1." + std::to_string(version_minor) + " " +
                    std::to_string(res.status) + " " +
                    ReasonPhrase(res.status) + "\r\nServer: kvault\r\n";
  if (!res.content_type.empty()) {
    out += "Content-Type: " + res.content_type + "\r\n";
  }
  for (const auto& [name, value] : res.headers) {
    out += name + ": " + value + "\r\n";
  }
  if (!res.pump) {
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  } else if (version_minor == 1) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  if (!keep_alive) out += "Connection: close\r\n";
  return out + "\r\n";
}

HttpConnection::HttpConnection(int fd, const ConnectionOptions& options,
                               const HttpCallbacks& callbacks,
                               const StopSignal* stop,
                               std::string_view received)
    : options_(options),
      callbacks_(callbacks),
      stop_(stop),
      socket_(fd, stop),
      parser_(options.limits) {
  parser_.Append(received);
}

int HttpConnection::Serve() {
  while (ServeOne()) {
    // Pipelined bytes are served here; an idle connection goes back.
    if (parser_.pending().empty()) return socket_.Release();
  }
  if (close_gracefully_) {
    socket_.CloseGracefully(stop_->stopping() ? milliseconds(0) : kLinger,
                            kLingerBytes);
  }
  return -1;
}

bool HttpConnection::ServeOne() {
  Status read = ReadHead();
  if (!read.ok()) {
    ReplyToReadError(read);
    return false;
  }
  const HttpRequestHead head = parser_.head();
  const int minor = head.request.version_minor;
  const bool head_only = head.request.method == "HEAD";
  const bool has_body =
      head.body_kind == BodyKind::kChunked ||
      (head.body_kind == BodyKind::kLength && head.content_length > 0);
  HttpResponse res;
  if (!callbacks_.admit(head.request, res)) {
    // The body was not read: the connection cannot carry another request.
    const bool keep = head.keep_alive && !has_body && !stop_->stopping();
    // Without a body the request is whole: taken, the parser reads the
    // next one (else it would see this head again, and the next request's
    // bytes as its body).
    if (keep && parser_.ParseBody().ok()) parser_.TakeRequest();
    return Send(res, head_only, minor, keep) && keep;
  }
  if (has_body && head.expect_continue &&
      !socket_.WriteAll("HTTP/1.1 100 Continue\r\n\r\n", WriteDeadline())
           .ok()) {
    return false;
  }
  read = ReadBody();
  if (!read.ok()) {
    ReplyToReadError(read);
    return false;
  }
  HttpRequest req = parser_.TakeRequest();
  req.wait = [this](int fd, WaitAlso also, HttpClock::time_point deadline) {
    return socket_.WaitFor(fd, also, deadline);
  };
  callbacks_.handle(req, res);
  const bool keep =
      head.keep_alive && !res.close_connection && !stop_->stopping();
  return Send(res, head_only, minor, keep) && keep;
}

Status HttpConnection::ReadMore(HttpClock::time_point deadline) {
  scratch_.clear();
  KV_RETURN_IF_ERROR(socket_.ReadSome(&scratch_, deadline));
  parser_.Append(scratch_);
  return Status::Ok();
}

Status HttpConnection::ReadHead() {
  const HttpClock::time_point deadline =
      HttpClock::now() + options_.head_timeout;
  while (true) {
    KV_ASSIGN_OR_RETURN(bool done, parser_.ParseHead());
    if (done) return Status::Ok();
    KV_RETURN_IF_ERROR(ReadMore(deadline));
  }
}

Status HttpConnection::ReadBody() {
  const HttpClock::time_point deadline =
      HttpClock::now() + options_.body_timeout;
  while (true) {
    KV_ASSIGN_OR_RETURN(bool done, parser_.ParseBody());
    if (done) return Status::Ok();
    KV_RETURN_IF_ERROR(ReadMore(deadline));
  }
}

void HttpConnection::ReplyToReadError(const Status& status) {
  HttpError error;
  if (!IsTransportError(status)) {
    error = HttpErrorForParse(status);
  } else if (status.reason() == kReasonRequestTimeout &&
             (parser_.has_head() || !parser_.pending().empty())) {
    error = MakeHttpError(
        408, kErrInvalidRequest,
        std::string(parser_.has_head() ? "request body" : "request head") +
            " not received in time",
        "request_timeout");
  } else {
    return;  // gone, idle, or stopping: nothing to answer
  }
  HttpResponse res;
  SetErrorResponse(error, res);
  Send(res, false, 1, false);
}

bool HttpConnection::Send(HttpResponse& res, bool head_only, int minor,
                          bool keep) {
  if (res.pump && !head_only) return Stream(res, minor) && keep;
  if (!keep) close_gracefully_ = true;
  std::string out = ResponseHead(res, minor, keep);
  if (!head_only) out += res.body;
  return socket_.WriteAll(out, WriteDeadline()).ok();
}

bool HttpConnection::Stream(HttpResponse& res, int minor) {
  const bool chunked = minor == 1;
  SocketChunkSink sink(&socket_, chunked, [this] { return WriteDeadline(); });
  bool completed =
      socket_.WriteAll(ResponseHead(res, minor, chunked), WriteDeadline()).ok();
  while (completed && !sink.done()) {
    completed = res.pump(sink) && !sink.failed();
  }
  if (completed && chunked) {
    completed = socket_.WriteAll("0\r\n\r\n", WriteDeadline()).ok();
  }
  if (res.on_stream_end) res.on_stream_end(completed);
  close_gracefully_ = completed;
  return completed && chunked;
}

HttpClock::time_point HttpConnection::WriteDeadline() const {
  return HttpClock::now() + options_.write_timeout;
}

}  // namespace kvault
