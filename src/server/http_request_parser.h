// A strict, incremental HTTP/1.1 request parser (RFC 9112). Pure: bytes in,
// a request head, then its body, or a precise error; no I/O. The connection
// layer appends what it reads and asks for the head, decides on the head
// (route, authentication) before asking for the body, and keeps the bytes
// after one request for the next (pipelining).
//
// Strictness is what keeps a proxy in front and kvault agreeing on where a
// request ends (request smuggling): conflicting Content-Length values,
// Content-Length together with Transfer-Encoding, obs-fold, whitespace
// before a colon, bare CR or LF, and malformed chunk framing are refused,
// never guessed at.
//
// Every error is a Status with a reason; HttpErrorForParse maps it to the
// HTTP status (400, 413, 431, 501, 505) and error body.
#ifndef KVAULT_SERVER_HTTP_REQUEST_PARSER_H_
#define KVAULT_SERVER_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status_or.h"
#include "server/chunked_decoder.h"
#include "server/http_error.h"
#include "server/http_message.h"

namespace kvault {

enum class BodyKind { kNone, kLength, kChunked };

// What the head says about the request and its framing.
struct HttpRequestHead {
  HttpRequest request;  // body empty, matches empty
  BodyKind body_kind = BodyKind::kNone;
  uint64_t content_length = 0;   // for kLength
  bool keep_alive = true;        // false: close after the response
  bool expect_continue = false;  // "Expect: 100-continue"
};

// Returns the HTTP error (status, type, message, reason) for a parser
// error: 413 body_too_large, 431 headers_too_large, 501
// unsupported_transfer_encoding, 505 http_version_not_supported, else 400.
HttpError HttpErrorForParse(const Status& status);

class HttpRequestParser {
 public:
  explicit HttpRequestParser(const HttpLimits& limits)
      : limits_(limits), chunked_(limits) {}

  // Appends bytes read from the client.
  void Append(std::string_view bytes);
  // Parses the head from the buffered bytes: true when it is complete (see
  // head()), false when more bytes are needed, or the error.
  StatusOr<bool> ParseHead();
  // Returns the head; valid after ParseHead returned true.
  const HttpRequestHead& head() const { return head_; }
  // Moves body bytes out of the buffer: true when the body is complete.
  // Call only after ParseHead returned true.
  StatusOr<bool> ParseBody();
  // Returns the complete request (head and body) and gets ready for the
  // next one; bytes after this request stay buffered.
  HttpRequest TakeRequest();
  // Returns the buffered bytes not consumed yet.
  std::string_view pending() const {
    return std::string_view(buffer_).substr(pos_);
  }
  // Returns true once a head was parsed and its request not taken yet.
  bool has_head() const { return has_head_; }

 private:
  void Compact();

  HttpLimits limits_;
  std::string buffer_;
  size_t pos_ = 0;  // start of the unconsumed bytes
  bool has_head_ = false;
  HttpRequestHead head_;
  std::string body_;
  ChunkedDecoder chunked_;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_REQUEST_PARSER_H_
