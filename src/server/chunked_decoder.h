// Decodes a chunked request body incrementally (RFC 9112 section 7.1).
#ifndef KVAULT_SERVER_CHUNKED_DECODER_H_
#define KVAULT_SERVER_CHUNKED_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status_or.h"
#include "server/http_message.h"

namespace kvault {

// Decodes a chunked body incrementally (RFC 9112 §7.1): chunk extensions
// are accepted and ignored, trailer fields are checked and dropped.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(const HttpLimits& limits) : limits_(limits) {}

  // Decodes what it can of `in`, appending data to *body; returns the bytes
  // consumed (fewer than in.size() when a line is incomplete or the body
  // ended: the rest belongs to the next request).
  StatusOr<size_t> Feed(std::string_view in, std::string* body);
  // Returns true once the last chunk and the trailer section were read.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  StatusOr<size_t> FeedLine(std::string_view in, std::string* body);
  Status OnSizeLine(std::string_view line, uint64_t body_size);
  Status OnTrailerLine(std::string_view line);

  HttpLimits limits_;
  State state_ = State::kSize;
  uint64_t chunk_left_ = 0;
  uint64_t trailer_bytes_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_SERVER_CHUNKED_DECODER_H_
