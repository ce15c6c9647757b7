// StatusOr<T>: either a value or a non-OK Status explaining its absence.
#ifndef KVAULT_CORE_STATUS_OR_H_
#define KVAULT_CORE_STATUS_OR_H_

#include <optional>
#include <utility>

#include "core/check.h"
#include "core/status.h"

namespace kvault {

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Holds an error; `status` must not be OK.
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    KV_CHECK(!status_.ok()) << "StatusOr constructed from an OK status";
  }
  // Holds a value.
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT

  // Returns true when a value is held.
  bool ok() const { return value_.has_value(); }
  // Returns OK when a value is held, else the error.
  const Status& status() const { return status_; }

  // Returns the value; precondition: ok().
  const T& value() const& { return Checked(), *value_; }
  T& value() & { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void Checked() const {
    KV_CHECK(value_.has_value()) << "value() on error: " << status_;
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kvault

#define KV_STATUS_CONCAT_INNER(a, b) a##b
#define KV_STATUS_CONCAT(a, b) KV_STATUS_CONCAT_INNER(a, b)

// KV_ASSIGN_OR_RETURN(auto x, MakeX()): binds the value or returns the error.
#define KV_ASSIGN_OR_RETURN(lhs, expr) \
  KV_ASSIGN_OR_RETURN_IMPL(KV_STATUS_CONCAT(_kv_or_, __LINE__), lhs, expr)
#define KV_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#endif  // KVAULT_CORE_STATUS_OR_H_
