// HTTP error mapping: a kvault Status becomes an HTTP status code and
// llama-server's error body
//
//   {"error": {"code": 400, "message": "...", "type": "invalid_request_error"},
//    "reason": "..."}
//
// llama-server's types: invalid_request_error 400, authentication_error 401,
// not_found_error 404, server_error 500, not_supported_error 501,
// unavailable_error 503. kvault adds 422 for a state file that is corrupt,
// truncated, of another version, or made for another model or layout (the
// file is well named and present but cannot be used), and 413 for a body
// over the size limit. The table is in docs/http_api.md.
#ifndef KVAULT_SERVER_HTTP_ERROR_H_
#define KVAULT_SERVER_HTTP_ERROR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kvault {

inline constexpr char kErrInvalidRequest[] = "invalid_request_error";
inline constexpr char kErrAuthentication[] = "authentication_error";
inline constexpr char kErrNotFound[] = "not_found_error";
inline constexpr char kErrServer[] = "server_error";
inline constexpr char kErrNotSupported[] = "not_supported_error";
inline constexpr char kErrUnavailable[] = "unavailable_error";
inline constexpr char kErrExceedContext[] = "exceed_context_size_error";

struct HttpError {
  int http_status = 500;
  std::string type;     // one of the kErr* types
  std::string message;  // human readable
  std::string reason;   // stable snake_case tag
  // Further fields of the "error" object (e.g. n_prompt_tokens, n_ctx).
  nlohmann::json details = nlohmann::json::object();
};

// Returns the HTTP error for a non-OK `status`: its code picks the HTTP status
// and type (state-file reasons pick 422); its reason is kept, or a default
// derived from the code ("invalid_argument", "not_found", ...) is used.
HttpError HttpErrorFromStatus(const Status& status);

// Returns an HttpError with the given fields (for errors made by the HTTP
// layer itself: 401, 404 route, 413, 503 loading).
HttpError MakeHttpError(int http_status, std::string_view type,
                        std::string message, std::string reason);

// Returns true when `reason` is one of the state-file reasons that make a
// restore a 422 (corrupt, truncated, version, model/layout/dtype mismatch).
bool IsStateFileReason(std::string_view reason);

// Returns the JSON body {"error":{"code","message","type"},"reason"}.
nlohmann::json ErrorJson(const HttpError& error);

// Returns `j` serialized on one line; invalid UTF-8 in strings is replaced
// by U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::json& j);

}  // namespace kvault

#endif  // KVAULT_SERVER_HTTP_ERROR_H_
