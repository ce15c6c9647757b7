// Python's operators on Values: arithmetic, comparison, equality and `in`,
// with Python's errors (TypeError, ZeroDivisionError) and jinja2's Undefined
// rules (arithmetic on an Undefined raises UndefinedError).
#ifndef KVAULT_JINJA_OPERATORS_H_
#define KVAULT_JINJA_OPERATORS_H_

#include <string_view>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class Interpreter;

// Returns `a op b` for op in + - * / // % **.
StatusOr<Value> BinaryOp(Interpreter& ip, std::string_view op, const Value& a,
                         const Value& b);

// Returns `-v` (negate) or `+v`.
StatusOr<Value> UnaryOp(bool negate, const Value& v);

// Python ==.
bool Equals(const Value& a, const Value& b);

// Returns `a op b` for op in == != < > <= >= in notin.
StatusOr<bool> Compare(std::string_view op, const Value& a, const Value& b);

// Returns Python's `item in container`.
StatusOr<bool> Contains(const Value& container, const Value& item);

// Returns a negative, zero or positive number as a <, == or > b; TypeError
// for values Python cannot order.
StatusOr<int> Order(const Value& a, const Value& b);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_OPERATORS_H_
