// Errors of the Jinja engine. Every failure is a kvault Status whose reason
// names the jinja2 exception class it stands for, so callers can map them
// (e.g. to HTTP 400) without parsing messages. The message reads
// "template:LINE:COL: <PythonClass>: <text>" (syntax errors omit the class).
//
//   kind            Status code          reason
//   kSyntax         kInvalidArgument     jinja_syntax_error
//   kTemplate       kInvalidArgument     jinja_template_error (raise_exception)
//   kUndefined      kInvalidArgument     jinja_undefined_error
//   kType           kInvalidArgument     jinja_type_error
//   kSecurity       kInvalidArgument     jinja_security_error
//   kValue          kInvalidArgument     jinja_value_error (also ZeroDivision,
//                                        Overflow, IndexError-like failures)
//   kLimit          kResourceExhausted   jinja_limit_exceeded
#ifndef KVAULT_JINJA_ERROR_H_
#define KVAULT_JINJA_ERROR_H_

#include <string>
#include <string_view>

#include "core/status.h"

namespace kvault::jinja {

enum class ErrorKind {
  kNone,  // OK or not a jinja error
  kSyntax,
  kTemplate,
  kUndefined,
  kType,
  kSecurity,
  kValue,
  kLimit,
};

// A position in the template source (1-based; 0 means unknown).
struct SourcePos {
  int line = 0;
  int column = 0;
};

// Returns the Python class name jinja2 would raise for `kind`.
std::string_view ErrorKindName(ErrorKind kind);

// Returns an error of `kind` with `message` (without location).
Status JinjaError(ErrorKind kind, std::string message);

// Returns `status` with "template:L:C: " prepended when it is a jinja error
// that has no location yet; other statuses pass through unchanged.
Status WithPosition(const Status& status, SourcePos pos);

// Returns the kind of a status made by this module (kNone otherwise).
ErrorKind ErrorKindOf(const Status& status);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_ERROR_H_
