#include "server/http_request_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "server/http_syntax.h"

namespace kvault {
namespace {

Status BadRequest(std::string_view reason, const std::string& message) {
  return InvalidArgumentError(message).WithReason(reason);
}

Status HeadTooLarge(size_t limit) {
  return ResourceExhaustedError("request head exceeds " +
                                std::to_string(limit) + " bytes")
      .WithReason(kReasonHeadersTooLarge);
}

// Sets path and query from an origin-form or absolute-form target.
Status ParseTarget(std::string_view target, const std::string& method,
                   HttpRequest* req) {
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '#') {
      return BadRequest(kReasonInvalidRequestTarget,
                        "request target " + Excerpt(target) +
                            " holds a byte not allowed in a URI");
    }
  }
  std::string_view path_query = target;
  const size_t scheme = target.find("://");
  if (target == "*" && method == "OPTIONS") {
    path_query = "*";
  } else if (scheme != std::string_view::npos && target[0] != '/' &&
             (EqualsIgnoreCase(target.substr(0, scheme), "http") ||
              EqualsIgnoreCase(target.substr(0, scheme), "https"))) {
    const size_t slash = target.find('/', scheme + 3);
    path_query = slash == std::string_view::npos ? "/" : target.substr(slash);
  } else if (target.empty() || target[0] != '/') {
    return BadRequest(kReasonInvalidRequestTarget,
                      "request target " + Excerpt(target) +
                          ": expected a path starting with '/'");
  }
  const size_t q = path_query.find('?');
  req->target = std::string(target);
  req->path = PercentDecode(path_query.substr(0, q), false);
  if (q != std::string_view::npos) req->query = path_query.substr(q + 1);
  return Status::Ok();
}

// Parses "METHOD SP request-target SP HTTP-version".
Status ParseRequestLine(std::string_view line, HttpRequest* req) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 =
      sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos ||
      !IsToken(line.substr(0, sp1))) {
    return BadRequest(
        kReasonMalformedRequestLine,
        "request line " + Excerpt(line) + ": expected 'METHOD /path HTTP/1.1'");
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" ||
      version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[5])) ||
      !std::isdigit(static_cast<unsigned char>(version[7]))) {
    return BadRequest(
        kReasonMalformedRequestLine,
        "HTTP version " + Excerpt(version) + ": expected HTTP/1.1 or HTTP/1.0");
  }
  if (version[5] != '1') {
    return UnimplementedError("HTTP version " + std::string(version) +
                              " is not supported; use HTTP/1.1")
        .WithReason(kReasonHttpVersionNotSupported);
  }
  req->method = std::string(line.substr(0, sp1));
  req->version_minor = version[7] == '0' ? 0 : 1;
  return ParseTarget(line.substr(sp1 + 1, sp2 - sp1 - 1), req->method, req);
}

// Returns every element of every header named `name`, lower-cased.
std::vector<std::string> ListValues(const HttpRequest& req,
                                    std::string_view name, size_t* count) {
  std::vector<std::string> out;
  *count = 0;
  for (const auto& [key, value] : req.headers) {
    if (!EqualsIgnoreCase(key, name)) continue;
    ++*count;
    for (std::string& item : SplitList(value)) out.push_back(std::move(item));
  }
  return out;
}

// Reads Content-Length: digits only; repeated equal values are one.
Status ApplyContentLength(const std::vector<std::string>& values,
                          HttpRequestHead* head) {
  if (values.empty()) {
    return BadRequest(kReasonInvalidContentLength, "Content-Length is empty");
  }
  for (const std::string& v : values) {
    uint64_t n = 0;
    for (char c : v) {
      if (c < '0' || c > '9') {
        return BadRequest(kReasonInvalidContentLength,
                          "Content-Length " + Excerpt(v) +
                              ": expected a non-negative decimal integer");
      }
      n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX : n * 10 + (c - '0');
    }
    if (v != values.front()) {
      return BadRequest(kReasonConflictingContentLength,
                        "Content-Length values " + Excerpt(values.front()) +
                            " and " + Excerpt(v) + " disagree");
    }
    head->content_length = n;
  }
  head->body_kind = BodyKind::kLength;
  return Status::Ok();
}

// Reads Transfer-Encoding: only "chunked", once, is understood.
Status ApplyTransferEncoding(const std::vector<std::string>& codings,
                             HttpRequestHead* head) {
  if (head->request.version_minor == 0) {
    return BadRequest(kReasonInvalidTransferEncoding,
                      "Transfer-Encoding is not allowed in HTTP/1.0");
  }
  if (codings.empty()) {
    return BadRequest(kReasonInvalidTransferEncoding,
                      "Transfer-Encoding is empty");
  }
  for (const std::string& c : codings) {
    if (c != "chunked") {
      return UnimplementedError("Transfer-Encoding " + Excerpt(c) +
                                " is not supported; only chunked is")
          .WithReason(kReasonUnsupportedTransferEncoding);
    }
  }
  if (codings.size() > 1) {
    return BadRequest(kReasonInvalidTransferEncoding,
                      "Transfer-Encoding lists chunked more than once");
  }
  head->body_kind = BodyKind::kChunked;
  return Status::Ok();
}

// Decides the framing (RFC 9112 §6.3) and the connection options.
Status ApplySemantics(HttpRequestHead* head) {
  const HttpRequest& req = head->request;
  size_t n_host = 0, n_cl = 0, n_te = 0, n_conn = 0, n_expect = 0;
  ListValues(req, "Host", &n_host);
  if (req.version_minor == 1 && n_host != 1) {
    return BadRequest(
        kReasonInvalidHost,
        "an HTTP/1.1 request needs exactly one Host header, got " +
            std::to_string(n_host));
  }
  const auto lengths = ListValues(req, "Content-Length", &n_cl);
  const auto codings = ListValues(req, "Transfer-Encoding", &n_te);
  if (n_cl > 0 && n_te > 0) {
    return BadRequest(kReasonContentLengthWithChunked,
                      "Content-Length and Transfer-Encoding together are "
                      "refused (RFC 9112 section 6.3)");
  }
  if (n_te > 0) KV_RETURN_IF_ERROR(ApplyTransferEncoding(codings, head));
  if (n_cl > 0) KV_RETURN_IF_ERROR(ApplyContentLength(lengths, head));
  const auto conn = ListValues(req, "Connection", &n_conn);
  auto has = [&conn](const char* t) {
    return std::find(conn.begin(), conn.end(), t) != conn.end();
  };
  head->keep_alive = req.version_minor == 1 ? !has("close") : has("keep-alive");
  const auto expect = ListValues(req, "Expect", &n_expect);
  head->expect_continue = req.version_minor == 1 && expect.size() == 1 &&
                          expect[0] == "100-continue";
  return Status::Ok();
}

// Parses the head's text (without the final empty line).
Status ParseHeadText(std::string_view text, const HttpLimits& limits,
                     HttpRequestHead* head) {
  size_t eol = text.find("\r\n");
  std::vector<std::string_view> lines;
  while (true) {
    lines.push_back(text.substr(0, eol));
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 2);
    eol = text.find("\r\n");
  }
  if (lines.size() - 1 > limits.max_headers) {
    return ResourceExhaustedError("request has more than " +
                                  std::to_string(limits.max_headers) +
                                  " header fields")
        .WithReason(kReasonHeadersTooLarge);
  }
  for (std::string_view line : lines) {
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      return BadRequest("invalid_header",
                        "bare CR or LF in request head line " + Excerpt(line));
    }
  }
  KV_RETURN_IF_ERROR(ParseRequestLine(lines[0], &head->request));
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string name, value;
    KV_RETURN_IF_ERROR(ParseFieldLine(lines[i], "header", &name, &value));
    head->request.headers.emplace_back(std::move(name), std::move(value));
  }
  return ApplySemantics(head);
}

}  // namespace

HttpError HttpErrorForParse(const Status& status) {
  HttpError e = HttpErrorFromStatus(status);
  const std::string_view reason = status.reason();
  if (reason == "body_too_large") {
    e.http_status = 413;
    e.type = kErrInvalidRequest;
  } else if (reason == "headers_too_large") {
    e.http_status = 431;
    e.type = kErrInvalidRequest;
  } else if (reason == "unsupported_transfer_encoding") {
    e.http_status = 501;
    e.type = kErrNotSupported;
  } else if (reason == "http_version_not_supported") {
    e.http_status = 505;
    e.type = kErrNotSupported;
  } else {
    e.http_status = 400;
    e.type = kErrInvalidRequest;
  }
  return e;
}

void HttpRequestParser::Append(std::string_view bytes) {
  buffer_.append(bytes.data(), bytes.size());
}

StatusOr<bool> HttpRequestParser::ParseHead() {
  if (has_head_) return true;
  // RFC 9112 section 2.2: empty lines before a request line are ignored.
  while (pending().substr(0, 2) == "\r\n") pos_ += 2;
  const std::string_view in = pending();
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (in.size() > limits_.max_head_bytes) {
      return HeadTooLarge(limits_.max_head_bytes);
    }
    return false;
  }
  if (end + 4 > limits_.max_head_bytes) {
    return HeadTooLarge(limits_.max_head_bytes);
  }
  head_ = HttpRequestHead();
  KV_RETURN_IF_ERROR(ParseHeadText(in.substr(0, end), limits_, &head_));
  pos_ += end + 4;
  has_head_ = true;
  body_.clear();
  chunked_ = ChunkedDecoder(limits_);
  return true;
}

StatusOr<bool> HttpRequestParser::ParseBody() {
  if (head_.body_kind == BodyKind::kNone) return true;
  if (head_.body_kind == BodyKind::kChunked) {
    KV_ASSIGN_OR_RETURN(size_t used, chunked_.Feed(pending(), &body_));
    pos_ += used;
    Compact();
    return chunked_.done();
  }
  if (head_.content_length > limits_.max_body_bytes) {
    return ResourceExhaustedError(
               "request body of " + std::to_string(head_.content_length) +
               " bytes exceeds the server's limit of " +
               std::to_string(limits_.max_body_bytes) + " bytes")
        .WithReason(kReasonBodyTooLarge);
  }
  const uint64_t need = head_.content_length - body_.size();
  const size_t take =
      static_cast<size_t>(std::min<uint64_t>(need, pending().size()));
  body_.append(pending().data(), take);
  pos_ += take;
  Compact();
  return body_.size() == head_.content_length;
}

HttpRequest HttpRequestParser::TakeRequest() {
  HttpRequest req = std::move(head_.request);
  req.body = std::move(body_);
  body_.clear();
  head_ = HttpRequestHead();
  has_head_ = false;
  Compact();
  return req;
}

void HttpRequestParser::Compact() {
  if (pos_ == buffer_.size()) {
    buffer_.clear();
    pos_ = 0;
  } else if (pos_ > (64u << 10) && pos_ > buffer_.size() / 2) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
}

}  // namespace kvault
