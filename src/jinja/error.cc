#include "jinja/error.h"

#include <utility>

namespace kvault::jinja {
namespace {

constexpr std::string_view kLocatedPrefix = "template:";

std::string_view ReasonOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax:
      return "jinja_syntax_error";
    case ErrorKind::kTemplate:
      return "jinja_template_error";
    case ErrorKind::kUndefined:
      return "jinja_undefined_error";
    case ErrorKind::kType:
      return "jinja_type_error";
    case ErrorKind::kSecurity:
      return "jinja_security_error";
    case ErrorKind::kValue:
      return "jinja_value_error";
    case ErrorKind::kLimit:
      return "jinja_limit_exceeded";
    case ErrorKind::kNone:
      break;
  }
  return "";
}

}  // namespace

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax:
      return "TemplateSyntaxError";
    case ErrorKind::kTemplate:
      return "TemplateError";
    case ErrorKind::kUndefined:
      return "UndefinedError";
    case ErrorKind::kType:
      return "TypeError";
    case ErrorKind::kSecurity:
      return "SecurityError";
    case ErrorKind::kValue:
      return "ValueError";
    case ErrorKind::kLimit:
      return "LimitExceeded";
    case ErrorKind::kNone:
      break;
  }
  return "";
}

Status JinjaError(ErrorKind kind, std::string message) {
  const StatusCode code = kind == ErrorKind::kLimit
                              ? StatusCode::kResourceExhausted
                              : StatusCode::kInvalidArgument;
  std::string text;
  if (kind != ErrorKind::kSyntax) {
    text = std::string(ErrorKindName(kind)) + ": ";
  }
  text += message;
  return Status(code, std::move(text)).WithReason(ReasonOf(kind));
}

Status WithPosition(const Status& status, SourcePos pos) {
  if (status.ok() || ErrorKindOf(status) == ErrorKind::kNone || pos.line <= 0 ||
      status.message().starts_with(kLocatedPrefix)) {
    return status;
  }
  return status.WithContext("template:" + std::to_string(pos.line) + ":" +
                            std::to_string(pos.column));
}

ErrorKind ErrorKindOf(const Status& status) {
  if (status.ok()) return ErrorKind::kNone;
  for (ErrorKind k :
       {ErrorKind::kSyntax, ErrorKind::kTemplate, ErrorKind::kUndefined,
        ErrorKind::kType, ErrorKind::kSecurity, ErrorKind::kValue,
        ErrorKind::kLimit}) {
    if (status.reason() == ReasonOf(k)) return k;
  }
  return ErrorKind::kNone;
}

}  // namespace kvault::jinja
