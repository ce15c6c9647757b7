#include "core/status.h"

#include <utility>

#include "core/check.h"

namespace kvault {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code == StatusCode::kOk) {
    KV_CHECK(message.empty()) << "OK status with message: " << message;
    return;
  }
  rep_ = std::make_shared<const Rep>(Rep{code, std::move(message), {}});
}

std::string_view Status::message() const {
  return rep_ ? std::string_view(rep_->message) : std::string_view();
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += rep_->message;
  Status out(code(), std::move(msg));
  return rep_->reason.empty() ? out : out.WithReason(rep_->reason);
}

std::string_view Status::reason() const {
  return rep_ ? std::string_view(rep_->reason) : std::string_view();
}

Status Status::WithReason(std::string_view reason) const {
  if (ok()) return *this;
  Status out;
  out.rep_ = std::make_shared<const Rep>(
      Rep{rep_->code, rep_->message, std::string(reason)});
  return out;
}

std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << s.ToString();
}

Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status NotFoundError(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
Status CorruptionError(std::string m) {
  return Status(StatusCode::kCorruption, std::move(m));
}
Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
Status IOError(std::string m) {
  return Status(StatusCode::kIOError, std::move(m));
}
Status InternalError(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}
Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}

Status CancelledError(std::string m) {
  return Status(StatusCode::kCancelled, std::move(m));
}

}  // namespace kvault
