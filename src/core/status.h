// Status: the result of every fallible call in kvault. A non-OK status says
// what failed, where, and the expected vs actual value in its message; the
// code tells callers (and the HTTP layer) which kind of failure it was.
#ifndef KVAULT_CORE_STATUS_H_
#define KVAULT_CORE_STATUS_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "core/reasons.h"  // the reasons WithReason takes

namespace kvault {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // caller passed something malformed
  kNotFound,            // a named thing (file, sequence, slot) does not exist
  kCorruption,          // stored bytes are inconsistent (checksum, truncation)
  kFailedPrecondition,  // the system is not in a state that allows the call
  kResourceExhausted,   // not enough room (pages, budget, disk)
  kUnavailable,         // temporarily unable; retrying later may succeed
  kIOError,             // the operating system reported an I/O failure
  kInternal,            // a bug or an impossible state
  kUnimplemented,       // a known feature this build does not support
  kCancelled,           // the caller (or shutdown) abandoned the operation
};

// Returns the stable name of `code`, e.g. "Corruption".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // Constructs OK.
  Status() = default;
  // Constructs a status with `code` and `message`; `code` may be kOk only with
  // an empty message.
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  // Returns true when this is OK.
  bool ok() const { return rep_ == nullptr; }
  // Returns the code (kOk when ok()).
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Returns the message ("" when ok()).
  std::string_view message() const;
  // Returns "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  // Returns a copy whose message is "<context>: <message>" (OK stays OK);
  // the reason is kept.
  Status WithContext(std::string_view context) const;
  // Returns the stable machine-readable reason ("" when none was set), e.g.
  // "checksum_mismatch": finer than the code, for clients that must tell
  // failures of one code apart (the HTTP layer's `reason` field).
  std::string_view reason() const;
  // Returns a copy tagged with `reason` (snake_case; OK stays OK).
  Status WithReason(std::string_view reason) const;

  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsCorruption() const { return code() == StatusCode::kCorruption; }
  bool IsIOError() const { return code() == StatusCode::kIOError; }
  bool IsResourceExhausted() const {
    return code() == StatusCode::kResourceExhausted;
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    std::string reason;
  };
  // Null for OK, so the OK path allocates nothing.
  std::shared_ptr<const Rep> rep_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status CorruptionError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnavailableError(std::string message);
Status IOError(std::string message);
Status InternalError(std::string message);
Status UnimplementedError(std::string message);
Status CancelledError(std::string message);

}  // namespace kvault

// Returns the status of `expr` from the enclosing function when it is not OK.
#define KV_RETURN_IF_ERROR(expr)                         \
  do {                                                   \
    ::kvault::Status _kv_status = (expr);                \
    if (!_kv_status.ok()) return _kv_status;             \
  } while (0)

#endif  // KVAULT_CORE_STATUS_H_
