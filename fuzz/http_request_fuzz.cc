// libFuzzer target for the HTTP request path: the strict request parser
// (request line, header fields, Content-Length / chunked framing, limits,
// pipelining), query decoding, and the JSON body check every POST route
// runs (ParseJsonObject). Properties checked on every input:
//   - feeding the bytes whole or in pieces of any size gives the same
//     requests (method, path, query, headers, body) and the same error;
//   - a request's body never exceeds the body limit;
//   - every error maps to one of the statuses the API documents (400, 413,
//     431, 501, 505) and carries a reason.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_assert.h"
#include "server/http_request_parser.h"
#include "server/json_fields.h"

namespace kvault {
namespace {

HttpLimits FuzzLimits() {
  HttpLimits l;
  l.max_head_bytes = 4096;
  l.max_headers = 32;
  l.max_body_bytes = 8192;
  return l;
}

// Returns one line describing each request parsed from `data` fed in
// pieces of `step` bytes, then the error reason ("" when none).
std::vector<std::string> ParseAll(std::string_view data, size_t step) {
  HttpRequestParser parser(FuzzLimits());
  std::vector<std::string> out;
  for (size_t at = 0; at < data.size(); at += step) {
    parser.Append(data.substr(at, step));
    while (true) {
      StatusOr<bool> r = parser.ParseHead();
      if (r.ok() && *r) r = parser.ParseBody();
      if (!r.ok()) {
        const HttpError e = HttpErrorForParse(r.status());
        FUZZ_ASSERT(e.http_status == 400 || e.http_status == 413 ||
                    e.http_status == 431 || e.http_status == 501 ||
                    e.http_status == 505);
        FUZZ_ASSERT(!e.reason.empty());
        out.push_back("error " + std::string(r.status().reason()));
        return out;
      }
      if (!*r) break;  // more bytes needed
      HttpRequest req = parser.TakeRequest();
      FUZZ_ASSERT(req.body.size() <= FuzzLimits().max_body_bytes);
      std::string line = req.method + " " + req.path + " ?" + req.query + " " +
                         req.Param("action");
      for (const auto& [name, value] : req.headers) {
        line += "|" + name + "=" + value;
      }
      out.push_back(line + " body=" + req.body);
      // The JSON check of every POST route; errors must carry a reason.
      StatusOr<nlohmann::json> body = ParseJsonObject(req.body);
      FUZZ_ASSERT(body.ok() || !body.status().reason().empty());
    }
  }
  return out;
}

}  // namespace
}  // namespace kvault

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the piece size of the incremental run.
  const size_t step = 1 + data[0] % 17;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  const std::vector<std::string> whole =
      kvault::ParseAll(bytes, bytes.empty() ? 1 : bytes.size());
  const std::vector<std::string> pieces = kvault::ParseAll(bytes, step);
  FUZZ_ASSERT(whole == pieces);
  return 0;
}
