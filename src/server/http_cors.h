// Cross-origin resource sharing as llama-server does it: every response
// names the origin it allows, and an OPTIONS request on any path is a
// preflight answered 200 before authentication (browsers send no
// credentials on a preflight).
#ifndef KVAULT_SERVER_HTTP_CORS_H_
#define KVAULT_SERVER_HTTP_CORS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "server/http_message.h"

namespace kvault {

// --cors-origins, --cors-methods, --cors-headers, --cors-credentials.
struct CorsOptions {
  // "*" (any), or the allowed origins; the entry "localhost" allows any
  // http(s) origin on localhost, 127.0.0.1 or [::1], on any port.
  std::vector<std::string> origins = {"*"};
  std::string methods = "GET, POST, DELETE, OPTIONS";
  std::string headers = "*";
  bool credentials = true;
};

// Parses --cors-origins: "*", "localhost", or comma-separated origins.
// InvalidArgument for an empty list or an entry with a path or no scheme.
StatusOr<std::vector<std::string>> ParseCorsOrigins(std::string_view text);

// Returns true when `origin` is http(s)://localhost, 127.0.0.1 or [::1],
// with an optional port and nothing after it.
bool IsLocalhostOrigin(std::string_view origin);

// Returns the Access-Control-Allow-Origin value for a request from
// `origin`, or nullopt when that origin is not allowed (or absent).
std::optional<std::string> CorsAllowOrigin(const CorsOptions& cors,
                                           std::string_view origin);

// Adds the headers every response to a request from `origin` carries.
void AddCorsHeaders(const CorsOptions& cors, std::string_view origin,
                    HttpResponse& res);

// Sets `res` to the answer to a preflight (OPTIONS) from `origin`.
void ReplyPreflight(const CorsOptions& cors, std::string_view origin,
                    HttpResponse& res);

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_CORS_H_
