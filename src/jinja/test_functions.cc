#include "jinja/test_functions.h"

#include <cmath>
#include <string>

#include "jinja/args.h"
#include "jinja/filters.h"
#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"

namespace kvault::jinja {
namespace {

bool IsCompareTest(std::string_view name, std::string* op) {
  static constexpr std::pair<std::string_view, std::string_view> kOps[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
      {">", ">"},   {"ge", ">="},      {">=", ">="},      {"in", "in"}};
  for (const auto& [n, o] : kOps) {
    if (n == name) {
      *op = o;
      return true;
    }
  }
  return false;
}

// `is sameas`: Python identity. Scalars compare by value (CPython interns
// None, bools and small ints); containers by their shared storage.
bool SameAs(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kNone:
    case ValueKind::kUndefined:
      return true;
    case ValueKind::kBool:
      return a.bool_value() == b.bool_value();
    case ValueKind::kInt:
      return a.int_value() == b.int_value();
    case ValueKind::kString:
      return &a.str() == &b.str();
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kGenerator:
      return &a.items() == &b.items();
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return &a.map() == &b.map();
    case ValueKind::kFunction:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

StatusOr<bool> Parity(const Value& v, int64_t divisor, int64_t remainder) {
  if (v.is_undefined()) return UndefinedFailure(v);
  if (v.is_float() && divisor != 0) {
    const double d = static_cast<double>(divisor);
    double m = std::fmod(v.AsDouble(), d);
    if (m != 0 && ((m < 0) != (d < 0))) m += d;
    return m == static_cast<double>(remainder);
  }
  if (!v.is_int() && !v.is_bool()) {
    return JinjaError(ErrorKind::kType, "unsupported operand type(s) for %: '" +
                                            TypeName(v) + "' and 'int'");
  }
  if (divisor == 0) {
    return JinjaError(ErrorKind::kValue,
                      "ZeroDivisionError: integer division or modulo by zero");
  }
  const int64_t x = v.is_int() ? v.int_value() : v.bool_value();
  int64_t m = x % divisor;
  if (m != 0 && ((m < 0) != (divisor < 0))) m += divisor;
  return m == remainder;
}

}  // namespace

StatusOr<bool> ApplyTest(Interpreter& ip, std::string_view name, const Value& v,
                         CallArgs& args) {
  KV_RETURN_IF_ERROR(ip.Charge(1));
  const ValueKind k = v.kind();
  if (name == "defined") return k != ValueKind::kUndefined;
  if (name == "undefined") return k == ValueKind::kUndefined;
  if (name == "none") return k == ValueKind::kNone;
  if (name == "boolean") return k == ValueKind::kBool;
  if (name == "true") return k == ValueKind::kBool && v.bool_value();
  if (name == "false") return k == ValueKind::kBool && !v.bool_value();
  if (name == "integer") return k == ValueKind::kInt;
  if (name == "float") return k == ValueKind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return k == ValueKind::kString;
  if (name == "mapping") return k == ValueKind::kDict;
  if (name == "escaped") return false;
  // jinja2's Undefined defines __iter__, __len__, __getitem__ and __call__,
  // so it passes these duck-typing tests.
  if (name == "iterable") {
    return k == ValueKind::kString || v.is_list_like() ||
           k == ValueKind::kDict || k == ValueKind::kUndefined;
  }
  if (name == "sequence") {
    return k == ValueKind::kString || k == ValueKind::kList ||
           k == ValueKind::kTuple || k == ValueKind::kDict ||
           k == ValueKind::kUndefined;
  }
  if (name == "callable") {
    return k == ValueKind::kFunction || k == ValueKind::kUndefined;
  }
  if (name == "lower" || name == "upper") {
    return PyIsClass(ToStr(v), name);
  }
  if (name == "odd") return Parity(v, 2, 1);
  if (name == "even") return Parity(v, 2, 0);
  ArgReader r(std::string(name), args, {"other"});
  KV_RETURN_IF_ERROR(r.status());
  if (name == "divisibleby") {
    const Value d = r.Get(0);
    if (!d.is_int()) {
      return JinjaError(ErrorKind::kType, "divisibleby needs an int");
    }
    return Parity(v, d.int_value(), 0);
  }
  if (name == "sameas") return SameAs(v, r.Get(0));
  if (name == "filter") return HasFilter(ToStr(v));
  if (name == "test") {
    static constexpr std::string_view kTests[] = {
        "defined",     "undefined", "none",   "boolean", "true",    "false",
        "integer",     "float",     "number", "string",  "mapping", "iterable",
        "sequence",    "callable",  "lower",  "upper",   "odd",     "even",
        "divisibleby", "sameas",    "eq",     "ne",      "lt",      "le",
        "gt",          "ge",        "in",     "escaped", "filter",  "test"};
    for (std::string_view t : kTests) {
      if (t == ToStr(v)) return true;
    }
    return false;
  }
  std::string op;
  if (IsCompareTest(name, &op)) return Compare(op, v, r.Get(0));
  return JinjaError(ErrorKind::kTemplate,
                    "No test named '" + std::string(name) + "'.");
}

}  // namespace kvault::jinja
