// Expression evaluation (statements are in interpreter.cc).
#include <utility>

#include "jinja/filters.h"
#include "jinja/interpreter.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/python_format.h"
#include "jinja/test_functions.h"

namespace kvault::jinja {

StatusOr<Value> Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  KV_RETURN_IF_ERROR(Charge(1));
  if (++depth_ > options_.max_depth) {
    --depth_;
    return WithPosition(JinjaError(ErrorKind::kLimit,
                                   "expression nesting exceeds the depth "
                                   "limit of " +
                                       std::to_string(options_.max_depth)),
                        e.pos);
  }
  StatusOr<Value> r = EvalInner(e, scope);
  --depth_;
  if (!r.ok()) return WithPosition(r.status(), e.pos);
  return r;
}

StatusOr<Value> Interpreter::EvalInner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return EvalName(e, scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict:
      return EvalContainer(e, scope);
    case ExprKind::kGetAttr:
    case ExprKind::kGetItem:
      return EvalAccess(e, scope);
    case ExprKind::kSlice:
      return EvalSlice(e, scope);
    case ExprKind::kCall:
      return EvalCall(e, scope);
    case ExprKind::kFilter:
      return EvalFilter(e, scope, nullptr);
    case ExprKind::kTest:
      return EvalTest(e, scope);
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      KV_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      return UnaryOp(e.kind == ExprKind::kNeg, v);
    }
    case ExprKind::kNot: {
      KV_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case ExprKind::kBinary: {
      KV_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      KV_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], scope));
      return BinaryOp(*this, e.name, a, b);
    }
    case ExprKind::kConcat:
      return EvalConcat(e, scope);
    case ExprKind::kCompare:
      return EvalCompare(e, scope);
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kCondExpr:
      return EvalLogic(e, scope);
  }
  return JinjaError(ErrorKind::kSyntax, "unknown expression");
}

StatusOr<Value> Interpreter::EvalName(const Expr& e, const ScopePtr& scope) {
  if (const Value* v = scope->Find(e.name)) return *v;
  return Value::Undefined("'" + e.name + "' is undefined");
}

StatusOr<Value> Interpreter::EvalContainer(const Expr& e,
                                           const ScopePtr& scope) {
  if (e.kind == ExprKind::kDict) {
    ValueMap map;
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      KV_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], scope));
      KV_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], scope));
      if (!k.is_string() && !k.is_number() && !k.is_none() &&
          k.kind() != ValueKind::kTuple) {
        return JinjaError(ErrorKind::kType,
                          "unhashable type: '" + TypeName(k) + "'");
      }
      map.SetKey(k, std::move(v));
    }
    return Value::Dict(std::move(map));
  }
  std::vector<Value> items;
  items.reserve(e.children.size());
  for (const ExprPtr& c : e.children) {
    KV_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
    items.push_back(std::move(v));
  }
  return e.kind == ExprKind::kList ? Value::List(std::move(items))
                                   : Value::Tuple(std::move(items));
}

StatusOr<Value> Interpreter::EvalAccess(const Expr& e, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
  if (obj.is_undefined()) return UndefinedFailure(obj);
  if (e.kind == ExprKind::kGetAttr) return GetAttr(obj, e.name);
  KV_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1], scope));
  return GetItem(obj, key);
}

StatusOr<Value> Interpreter::EvalSlice(const Expr& e, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
  if (obj.is_undefined()) return UndefinedFailure(obj);
  Value bounds[3];
  const Value* ptrs[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (!e.children[i + 1]) continue;
    KV_ASSIGN_OR_RETURN(bounds[i], Eval(*e.children[i + 1], scope));
    ptrs[i] = &bounds[i];
  }
  return SliceValue(*this, obj, ptrs[0], ptrs[1], ptrs[2]);
}

Status Interpreter::EvalArgs(const Expr& e, size_t first, const ScopePtr& scope,
                             CallArgs* args) {
  for (size_t i = first; i < e.children.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], scope));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    KV_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args->keyword.emplace_back(name, std::move(v));
  }
  return Status::Ok();
}

StatusOr<Value> Interpreter::EvalCall(const Expr& e, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], scope));
  if (callee.is_undefined()) return UndefinedFailure(callee);
  CallArgs args;
  KV_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  return Call(callee, args);
}

StatusOr<Value> Interpreter::EvalFilter(const Expr& e, const ScopePtr& scope,
                                        const Value* input) {
  Value operand;
  if (e.children[0]) {
    // Filter blocks chain filters whose innermost operand is the body.
    if (e.children[0]->kind == ExprKind::kFilter && input) {
      KV_ASSIGN_OR_RETURN(operand, EvalFilter(*e.children[0], scope, input));
    } else {
      KV_ASSIGN_OR_RETURN(operand, Eval(*e.children[0], scope));
    }
  } else if (input) {
    operand = *input;
  }
  CallArgs args;
  KV_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  StatusOr<Value> r = ApplyFilter(*this, e.name, operand, args);
  if (!r.ok()) return WithPosition(r.status(), e.pos);
  return r;
}

StatusOr<Value> Interpreter::EvalTest(const Expr& e, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0], scope));
  CallArgs args;
  KV_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  KV_ASSIGN_OR_RETURN(bool r, ApplyTest(*this, e.name, operand, args));
  return Value::Bool(r != e.negated);
}

StatusOr<Value> Interpreter::EvalCompare(const Expr& e, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    KV_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], scope));
    KV_ASSIGN_OR_RETURN(bool r, Compare(e.ops[i], left, right));
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

StatusOr<Value> Interpreter::EvalConcat(const Expr& e, const ScopePtr& scope) {
  std::string out;
  for (const ExprPtr& c : e.children) {
    KV_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
    if (!AppendStr(v, options_.max_output_bytes, &out)) {
      return CheckSize(options_.max_output_bytes + 1);
    }
  }
  KV_RETURN_IF_ERROR(CheckSize(out.size()));
  KV_RETURN_IF_ERROR(ChargeBytes(out.size()));
  return Value::String(std::move(out));
}

StatusOr<Value> Interpreter::EvalLogic(const Expr& e, const ScopePtr& scope) {
  if (e.kind == ExprKind::kCondExpr) {
    KV_ASSIGN_OR_RETURN(Value cond, Eval(*e.children[1], scope));
    if (cond.Truthy()) return Eval(*e.children[0], scope);
    if (e.children[2]) return Eval(*e.children[2], scope);
    return Value::Undefined(
        "the inline if-expression on line " + std::to_string(e.pos.line) +
        " evaluated to false and no else section was defined.");
  }
  KV_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
  // Python's and/or return an operand, not a bool.
  if (e.kind == ExprKind::kAnd ? !left.Truthy() : left.Truthy()) return left;
  return Eval(*e.children[1], scope);
}

}  // namespace kvault::jinja
