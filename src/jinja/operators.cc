#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/interpreter.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"

namespace kvault::jinja {
namespace {

bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t IntOf(const Value& v) {
  return v.is_bool() ? static_cast<int64_t>(v.bool_value()) : v.int_value();
}

Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return JinjaError(ErrorKind::kType,
                    "unsupported operand type(s) for " + std::string(op) +
                        ": '" + TypeName(a) + "' and '" + TypeName(b) + "'");
}

Status Overflow() {
  return JinjaError(ErrorKind::kValue,
                    "integer overflow (kvault keeps ints in 64 bits)");
}

StatusOr<Value> Add(Interpreter& ip, const Value& a, const Value& b) {
  if (IsIntLike(a) && IsIntLike(b)) {
    int64_t r;
    if (__builtin_add_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
    return Value::Int(r);
  }
  if (a.is_number() && b.is_number()) {
    return Value::Float(a.AsDouble() + b.AsDouble());
  }
  if (a.is_string() && b.is_string()) {
    KV_RETURN_IF_ERROR(ip.CheckSize(a.str().size() + b.str().size()));
    KV_RETURN_IF_ERROR(ip.ChargeBytes(a.str().size() + b.str().size()));
    return Value::String(a.str() + b.str());
  }
  if ((a.kind() == ValueKind::kList || a.kind() == ValueKind::kTuple) &&
      a.kind() == b.kind()) {
    KV_RETURN_IF_ERROR(ip.ChargeItems(a.items().size() + b.items().size()));
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return a.kind() == ValueKind::kList ? Value::List(std::move(items))
                                        : Value::Tuple(std::move(items));
  }
  if (a.is_string() || a.kind() == ValueKind::kList ||
      a.kind() == ValueKind::kTuple) {
    return JinjaError(ErrorKind::kType, "can only concatenate " + TypeName(a) +
                                            " (not \"" + TypeName(b) +
                                            "\") to " + TypeName(a));
  }
  return Unsupported("+", a, b);
}

StatusOr<Value> Repeat(Interpreter& ip, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const size_t len = seq.str().size();
    if (len > 0 && static_cast<uint64_t>(n) > (size_t{1} << 40) / len) {
      return ip.CheckSize(std::numeric_limits<size_t>::max());
    }
    KV_RETURN_IF_ERROR(ip.CheckSize(len * n));
    KV_RETURN_IF_ERROR(ip.ChargeBytes(len * n));
    std::string out;
    out.reserve(len * n);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  const size_t len = seq.items().size();
  if (len > 0 && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / len) {
    return ip.Charge(std::numeric_limits<uint64_t>::max() / 2);
  }
  KV_RETURN_IF_ERROR(ip.ChargeItems(len * n));
  std::vector<Value> items;
  items.reserve(len * n);
  for (int64_t i = 0; i < n; ++i) {
    items.insert(items.end(), seq.items().begin(), seq.items().end());
  }
  return seq.kind() == ValueKind::kTuple ? Value::Tuple(std::move(items))
                                         : Value::List(std::move(items));
}

StatusOr<Value> Multiply(Interpreter& ip, const Value& a, const Value& b) {
  if (IsIntLike(a) && IsIntLike(b)) {
    int64_t r;
    if (__builtin_mul_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
    return Value::Int(r);
  }
  if (a.is_number() && b.is_number()) {
    return Value::Float(a.AsDouble() * b.AsDouble());
  }
  auto is_seq = [](const Value& v) {
    return v.is_string() || v.kind() == ValueKind::kList ||
           v.kind() == ValueKind::kTuple;
  };
  if (is_seq(a) && IsIntLike(b)) return Repeat(ip, a, IntOf(b));
  if (is_seq(b) && IsIntLike(a)) return Repeat(ip, b, IntOf(a));
  if (is_seq(a) || is_seq(b)) {
    return JinjaError(ErrorKind::kType,
                      "can't multiply sequence by non-int of type '" +
                          TypeName(is_seq(a) ? b : a) + "'");
  }
  return Unsupported("*", a, b);
}

Status ZeroDivision(std::string_view what) {
  return JinjaError(ErrorKind::kValue,
                    "ZeroDivisionError: " + std::string(what));
}

StatusOr<Value> Divide(std::string_view op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return Unsupported(op, a, b);
  if (op == "/") {
    if (b.AsDouble() == 0) return ZeroDivision("division by zero");
    return Value::Float(a.AsDouble() / b.AsDouble());
  }
  if (IsIntLike(a) && IsIntLike(b)) {
    const int64_t x = IntOf(a), y = IntOf(b);
    if (y == 0) return ZeroDivision("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      return Overflow();
    }
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      q -= 1;
      r += y;
    }
    return Value::Int(op == "//" ? q : r);
  }
  const double x = a.AsDouble(), y = b.AsDouble();
  if (y == 0) return ZeroDivision("float divmod()");
  // CPython's float_divmod: derive the quotient from fmod so that
  // 0.5 // 0.1 is 4.0 (x / y rounds up to 5.0).
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (op == "%") return Value::Float(mod);
  double floordiv = std::copysign(0.0, x / y);
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  }
  return Value::Float(floordiv);
}

StatusOr<Value> Power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return Unsupported("** or pow()", a, b);
  if (IsIntLike(a) && IsIntLike(b) && IntOf(b) >= 0) {
    int64_t base = IntOf(a), exp = IntOf(b), r = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(r, base, &r)) return Overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) {
        return Overflow();
      }
    }
    return Value::Int(r);
  }
  if (a.AsDouble() == 0 && b.AsDouble() < 0) {
    return ZeroDivision("0.0 cannot be raised to a negative power");
  }
  return Value::Float(std::pow(a.AsDouble(), b.AsDouble()));
}

}  // namespace

StatusOr<Value> BinaryOp(Interpreter& ip, std::string_view op, const Value& a,
                         const Value& b) {
  if (a.is_undefined()) return UndefinedFailure(a);
  if (b.is_undefined()) return UndefinedFailure(b);
  if (op == "+") return Add(ip, a, b);
  if (op == "*") return Multiply(ip, a, b);
  if (op == "-") {
    if (IsIntLike(a) && IsIntLike(b)) {
      int64_t r;
      if (__builtin_sub_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
      return Value::Int(r);
    }
    if (a.is_number() && b.is_number()) {
      return Value::Float(a.AsDouble() - b.AsDouble());
    }
    return Unsupported("-", a, b);
  }
  if (op == "%" && a.is_string()) {
    KV_ASSIGN_OR_RETURN(std::string s, PercentFormat(a.str(), b));
    KV_RETURN_IF_ERROR(ip.CheckSize(s.size()));
    return Value::String(std::move(s));
  }
  if (op == "/" || op == "//" || op == "%") return Divide(op, a, b);
  if (op == "**") return Power(a, b);
  return JinjaError(ErrorKind::kSyntax, "unknown operator " + std::string(op));
}

StatusOr<Value> UnaryOp(bool negate, const Value& v) {
  if (v.is_undefined()) return UndefinedFailure(v);
  if (IsIntLike(v)) {
    if (!negate) return Value::Int(IntOf(v));
    if (IntOf(v) == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-IntOf(v));
  }
  if (v.is_float()) return Value::Float(negate ? -v.AsDouble() : v.AsDouble());
  return JinjaError(ErrorKind::kType, std::string("bad operand type for "
                                                  "unary ") +
                                          (negate ? "-" : "+") + ": '" +
                                          TypeName(v) + "'");
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b)) return IntOf(a) == IntOf(b);
    return a.AsDouble() == b.AsDouble();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.str() == b.str();
    case ValueKind::kList:
    case ValueKind::kTuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      if (a.map().size() != b.map().size()) return false;
      for (const auto& [k, v] : a.map().entries()) {
        const Value* other = b.map().Find(k);
        if (!other || !Equals(v, *other)) return false;
      }
      return true;
    }
    case ValueKind::kNamespace:
      return &a.map() == &b.map();
    case ValueKind::kFunction:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

StatusOr<int> Order(const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedFailure(a);
  if (b.is_undefined()) return UndefinedFailure(b);
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b)) {
      return IntOf(a) < IntOf(b) ? -1 : IntOf(a) > IntOf(b) ? 1 : 0;
    }
    const double x = a.AsDouble(), y = b.AsDouble();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if ((a.kind() == ValueKind::kList || a.kind() == ValueKind::kTuple) &&
      a.kind() == b.kind()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return JinjaError(ErrorKind::kType,
                    "'<' not supported between instances of '" + TypeName(a) +
                        "' and '" + TypeName(b) + "'");
}

StatusOr<bool> Compare(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "notin") {
    KV_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return !in;
  }
  KV_ASSIGN_OR_RETURN(int c, Order(a, b));
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        return JinjaError(ErrorKind::kType,
                          "'in <string>' requires string as left operand, "
                          "not " +
                              TypeName(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kGenerator:
      for (const Value& v : container.items()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case ValueKind::kDict:
      return container.map().FindKey(item) != nullptr;
    default:
      return JinjaError(
          ErrorKind::kType,
          "argument of type '" + TypeName(container) + "' is not iterable");
  }
}

}  // namespace kvault::jinja
