#include "server/http_error.h"

#include <array>

#include "core/env.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

// Returns the reason used when a status carries none.
std::string DefaultReason(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kIOError:
      return "io_error";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kUnimplemented:
      return "unimplemented";
    case StatusCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace

bool IsStateFileReason(std::string_view reason) {
  static constexpr std::array<std::string_view, 10> kReasons = {
      kReasonTruncated,          kReasonBadMagic,      kReasonChecksumMismatch,
      kReasonVersionUnsupported, kReasonBadHeader,     kReasonTrailingBytes,
      kReasonBadTrailer,         kReasonModelMismatch, kReasonLayoutMismatch,
      kReasonDtypeMismatch};
  for (std::string_view r : kReasons) {
    if (r == reason) return true;
  }
  return false;
}

HttpError MakeHttpError(int http_status, std::string_view type,
                        std::string message, std::string reason) {
  return HttpError{http_status, std::string(type), std::move(message),
                   std::move(reason)};
}

HttpError HttpErrorFromStatus(const Status& status) {
  HttpError e;
  e.message = std::string(status.message());
  e.reason = status.reason().empty() ? DefaultReason(status.code())
                                     : std::string(status.reason());
  // A state file that exists but cannot be used: 422, whatever the code
  // (Corruption, FailedPrecondition for mismatches, Unimplemented for a
  // newer version).
  if (IsStateFileReason(status.reason()) ||
      status.code() == StatusCode::kCorruption) {
    e.http_status = 422;
    e.type = kErrInvalidRequest;
    return e;
  }
  // A full disk is not the client's fault and may pass: 507 Insufficient
  // Storage says exactly that (503 would suggest the server is down).
  if (status.reason() == kReasonDiskFull) {
    e.http_status = 507;
    e.type = kErrServer;
    return e;
  }
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
      e.http_status = 400;
      e.type = kErrInvalidRequest;
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.type = kErrNotFound;
      break;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:  // only a stopping server cancels a live
                                  // request
      e.http_status = 503;
      e.type = kErrUnavailable;
      break;
    case StatusCode::kUnimplemented:
      e.http_status = 501;
      e.type = kErrNotSupported;
      break;
    default:  // kIOError, kInternal (and kOk, which callers never pass)
      e.http_status = 500;
      e.type = kErrServer;
      break;
  }
  return e;
}

nlohmann::json ErrorJson(const HttpError& error) {
  nlohmann::json body{{"code", error.http_status},
                      {"message", error.message},
                      {"type", error.type}};
  body.update(error.details);
  return nlohmann::json{{"error", std::move(body)}, {"reason", error.reason}};
}

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvault
