#include "server/chunked_decoder.h"

#include <algorithm>

#include "server/http_syntax.h"

namespace kvault {
namespace {

// The longest chunk-size line (size and extensions) accepted.
constexpr size_t kMaxSizeLine = 4096;

Status MalformedChunk(const std::string& why) {
  return InvalidArgumentError("chunked body: " + why)
      .WithReason(kReasonMalformedChunk);
}

Status BodyTooLarge(uint64_t limit) {
  return ResourceExhaustedError("request body exceeds the server's limit of " +
                                std::to_string(limit) + " bytes")
      .WithReason(kReasonBodyTooLarge);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Checks the chunk extensions after the size: empty, or BWS ';' ... with
// no control characters but HTAB (their names and values are ignored).
Status CheckExtensions(std::string_view ext) {
  std::string_view rest = TrimOws(ext);
  if (rest.empty()) return Status::Ok();
  if (rest[0] != ';') {
    return MalformedChunk("expected ';' or CRLF after the chunk size, got " +
                          Excerpt(ext));
  }
  for (char c : rest) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return MalformedChunk("control character in chunk extension " +
                            Excerpt(ext));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<size_t> ChunkedDecoder::Feed(std::string_view in, std::string* body) {
  size_t used = 0;
  while (used < in.size() && state_ != State::kDone) {
    std::string_view rest = in.substr(used);
    if (state_ == State::kData) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(chunk_left_, rest.size()));
      body->append(rest.data(), n);
      used += n;
      chunk_left_ -= n;
      if (chunk_left_ == 0) state_ = State::kDataEnd;
    } else if (state_ == State::kDataEnd) {
      if (rest[0] != '\r' || (rest.size() >= 2 && rest[1] != '\n')) {
        return MalformedChunk("chunk data not followed by CRLF (got " +
                              Excerpt(rest.substr(0, 2)) + ")");
      }
      if (rest.size() < 2) break;
      used += 2;
      state_ = State::kSize;
    } else {
      KV_ASSIGN_OR_RETURN(size_t n, FeedLine(rest, body));
      if (n == 0) break;
      used += n;
    }
  }
  return used;
}

StatusOr<size_t> ChunkedDecoder::FeedLine(std::string_view in,
                                          std::string* body) {
  const size_t eol = in.find("\r\n");
  const size_t max_line =
      state_ == State::kSize ? kMaxSizeLine : limits_.max_head_bytes;
  if (eol == std::string_view::npos) {
    if (in.size() > max_line) {
      return MalformedChunk("a line is longer than " +
                            std::to_string(max_line) + " bytes");
    }
    return size_t{0};  // incomplete line: wait for more bytes
  }
  const std::string_view line = in.substr(0, eol);
  if (line.find_first_of("\r\n") != std::string_view::npos) {
    return MalformedChunk("bare CR or LF in line " + Excerpt(line));
  }
  KV_RETURN_IF_ERROR(state_ == State::kSize ? OnSizeLine(line, body->size())
                                            : OnTrailerLine(line));
  return eol + 2;
}

Status ChunkedDecoder::OnSizeLine(std::string_view line, uint64_t body_size) {
  uint64_t size = 0;
  size_t digits = 0;
  bool overflow = false;
  for (; digits < line.size() && HexDigit(line[digits]) >= 0; ++digits) {
    overflow |= size > (UINT64_MAX >> 4);
    size = (size << 4) | static_cast<uint64_t>(HexDigit(line[digits]));
  }
  if (digits == 0) {
    return MalformedChunk("chunk size " + Excerpt(line) +
                          " is not a hexadecimal number");
  }
  KV_RETURN_IF_ERROR(CheckExtensions(line.substr(digits)));
  if (size == 0) {
    state_ = State::kTrailer;
    return Status::Ok();
  }
  if (overflow ||
      size > limits_.max_body_bytes -
                 std::min<uint64_t>(body_size, limits_.max_body_bytes)) {
    return BodyTooLarge(limits_.max_body_bytes);
  }
  chunk_left_ = size;
  state_ = State::kData;
  return Status::Ok();
}

Status ChunkedDecoder::OnTrailerLine(std::string_view line) {
  if (line.empty()) {
    state_ = State::kDone;
    return Status::Ok();
  }
  trailer_bytes_ += line.size() + 2;
  if (trailer_bytes_ > limits_.max_head_bytes) {
    return ResourceExhaustedError("trailer section exceeds " +
                                  std::to_string(limits_.max_head_bytes) +
                                  " bytes")
        .WithReason(kReasonHeadersTooLarge);
  }
  std::string name;
  std::string value;
  return ParseFieldLine(line, "trailer", &name, &value);
}

}  // namespace kvault
