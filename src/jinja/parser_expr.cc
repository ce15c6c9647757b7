// Expression parsing (the statement half is parser.cc).
#include <utility>

#include "jinja/parser.h"

namespace kvault::jinja {
namespace {

ExprPtr NewExpr(ExprKind kind, SourcePos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr Binary(ExprKind kind, std::string op, ExprPtr a, ExprPtr b) {
  auto e = NewExpr(kind, a->pos);
  e->name = std::move(op);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return e;
}

}  // namespace

StatusOr<ExprPtr> Parser::ParseTuple(bool allow_empty, bool with_condexpr) {
  const SourcePos pos = Peek().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) KV_RETURN_IF_ERROR(ExpectOp(","));
    const Token& t = Peek();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd ||
        IsOp(")") || IsName("recursive") || (!items.empty() && IsName("if"))) {
      break;
    }
    KV_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (items.size() == 1) return std::move(items[0]);
    if (!allow_empty) return Unexpected("an expression");
  }
  auto e = NewExpr(ExprKind::kTuple, pos);
  e->children = std::move(items);
  return e;
}

StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  KV_RETURN_IF_ERROR(Enter());
  StatusOr<ExprPtr> r = ParseOr();
  while (r.ok() && with_condexpr && SkipName("if")) {
    ExprPtr value = std::move(*r);
    StatusOr<ExprPtr> cond = ParseOr();
    if (!cond.ok()) {
      r = cond.status();
      break;
    }
    ExprPtr otherwise;
    if (SkipName("else")) {
      StatusOr<ExprPtr> o = ParseExpression(true);
      if (!o.ok()) {
        r = o.status();
        break;
      }
      otherwise = std::move(*o);
    }
    auto e = NewExpr(ExprKind::kCondExpr, value->pos);
    e->children.push_back(std::move(value));
    e->children.push_back(std::move(*cond));
    e->children.push_back(std::move(otherwise));
    r = std::move(e);
  }
  Leave();
  return r;
}

StatusOr<ExprPtr> Parser::ParseOr() {
  KV_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (SkipName("or")) {
    KV_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    left = Binary(ExprKind::kOr, "or", std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseAnd() {
  KV_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (SkipName("and")) {
    KV_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    left = Binary(ExprKind::kAnd, "and", std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  const SourcePos pos = Next().pos;
  KV_RETURN_IF_ERROR(Enter());
  StatusOr<ExprPtr> inner = ParseNot();
  Leave();
  if (!inner.ok()) return inner.status();
  auto e = NewExpr(ExprKind::kNot, pos);
  e->children.push_back(std::move(*inner));
  return e;
}

StatusOr<ExprPtr> Parser::ParseCompare() {
  KV_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& t = Peek();
    if (t.type == TokenType::kOp &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
         t.text == "<=" || t.text == ">=")) {
      op = Next().text;
    } else if (SkipName("in")) {
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      Next();
      Next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = NewExpr(ExprKind::kCompare, first->pos);
      cmp->children.push_back(std::move(first));
    }
    KV_ASSIGN_OR_RETURN(ExprPtr next, ParseMath1());
    cmp->children.push_back(std::move(next));
    cmp->ops.push_back(std::move(op));
  }
  return cmp ? std::move(cmp) : std::move(first);
}

StatusOr<ExprPtr> Parser::ParseMath1() {
  KV_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    std::string op = Next().text;
    KV_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    left = Binary(ExprKind::kBinary, op, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseConcat() {
  KV_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!IsOp("~")) return first;
  auto e = NewExpr(ExprKind::kConcat, first->pos);
  e->children.push_back(std::move(first));
  while (SkipOp("~")) {
    KV_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    e->children.push_back(std::move(next));
  }
  return e;
}

StatusOr<ExprPtr> Parser::ParseMath2() {
  KV_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    std::string op = Next().text;
    KV_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    left = Binary(ExprKind::kBinary, op, std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParsePow() {
  KV_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (SkipOp("**")) {
    KV_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    left = Binary(ExprKind::kBinary, "**", std::move(left), std::move(right));
  }
  return left;
}

StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  KV_RETURN_IF_ERROR(Enter());
  StatusOr<ExprPtr> node{ExprPtr()};
  if (IsOp("-") || IsOp("+")) {
    const Token& op = Next();
    auto e = NewExpr(op.text == "-" ? ExprKind::kNeg : ExprKind::kPos, op.pos);
    StatusOr<ExprPtr> inner = ParseUnary(false);
    if (inner.ok()) {
      e->children.push_back(std::move(*inner));
      node = std::move(e);
    } else {
      node = inner.status();
    }
  } else {
    node = ParsePrimary();
  }
  if (node.ok()) node = ParsePostfix(std::move(*node));
  if (node.ok() && with_filter) node = ParseFilterExpr(std::move(*node));
  Leave();
  return node;
}

StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Peek();
  if (t.type == TokenType::kName) {
    const std::string& n = t.text;
    auto e = NewExpr(ExprKind::kLiteral, t.pos);
    if (n == "true" || n == "True") {
      e->literal = Value::Bool(true);
    } else if (n == "false" || n == "False") {
      e->literal = Value::Bool(false);
    } else if (n == "none" || n == "None") {
      e->literal = Value::None();
    } else {
      e->kind = ExprKind::kName;
      e->name = n;
      if (n == "loop") saw_loop_name_ = true;
      if (n == "varargs") saw_varargs_name_ = true;
      if (n == "kwargs") saw_kwargs_name_ = true;
    }
    Next();
    return e;
  }
  if (t.type == TokenType::kString) {
    auto e = NewExpr(ExprKind::kLiteral, t.pos);
    std::string s;
    while (Peek().type == TokenType::kString) s += Next().text;
    e->literal = Value::String(std::move(s));
    return e;
  }
  if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
    auto e = NewExpr(ExprKind::kLiteral, t.pos);
    e->literal = t.type == TokenType::kInt ? Value::Int(t.int_value)
                                           : Value::Float(t.float_value);
    Next();
    return e;
  }
  if (SkipOp("(")) {
    KV_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true));
    KV_RETURN_IF_ERROR(ExpectOp(")"));
    return e;
  }
  if (IsOp("[")) return ParseListOrDict(false);
  if (IsOp("{")) return ParseListOrDict(true);
  return Unexpected("an expression");
}

StatusOr<ExprPtr> Parser::ParseListOrDict(bool dict) {
  auto e = NewExpr(dict ? ExprKind::kDict : ExprKind::kList, Next().pos);
  const char* close = dict ? "}" : "]";
  while (!SkipOp(close)) {
    if (!e->children.empty()) {
      KV_RETURN_IF_ERROR(ExpectOp(","));
      if (SkipOp(close)) break;
    }
    KV_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    e->children.push_back(std::move(item));
    if (dict) {
      KV_RETURN_IF_ERROR(ExpectOp(":"));
      KV_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->children.push_back(std::move(value));
    }
  }
  return e;
}

StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      KV_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      auto call = NewExpr(ExprKind::kCall, node->pos);
      call->children.push_back(std::move(node));
      KV_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (SkipOp("|")) {
      KV_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (IsName("is")) {
      KV_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      auto call = NewExpr(ExprKind::kCall, node->pos);
      call->children.push_back(std::move(node));
      KV_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const Token& t = Next();
  if (t.text == ".") {
    const Token& attr = Next();
    if (attr.type == TokenType::kName) {
      auto e = NewExpr(ExprKind::kGetAttr, t.pos);
      e->name = attr.text;
      e->children.push_back(std::move(node));
      return e;
    }
    if (attr.type == TokenType::kInt) {
      auto e = NewExpr(ExprKind::kGetItem, t.pos);
      auto index = NewExpr(ExprKind::kLiteral, attr.pos);
      index->literal = Value::Int(attr.int_value);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(index));
      return e;
    }
    return Error(attr, "expected name or number");
  }
  // '[': an index, a slice, or a tuple of them.
  ExprPtr parts[3];
  bool slice = false;
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      if (!SkipOp(":")) break;
      slice = true;
    }
    if (IsOp(":") || IsOp("]")) continue;
    KV_ASSIGN_OR_RETURN(parts[i], ParseExpression());
    if (i == 0 && IsOp(",")) {
      return Error(Peek(), "tuple subscripts are not supported");
    }
  }
  KV_RETURN_IF_ERROR(ExpectOp("]"));
  if (!slice && !parts[0]) return Error(t, "expected an index");
  auto e = NewExpr(slice ? ExprKind::kSlice : ExprKind::kGetItem, t.pos);
  e->children.push_back(std::move(node));
  e->children.push_back(std::move(parts[0]));
  if (slice) {
    e->children.push_back(std::move(parts[1]));
    e->children.push_back(std::move(parts[2]));
  }
  return e;
}

StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr node) {
  const SourcePos pos = Peek().pos;
  KV_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (IsOp(".") && Peek(1).type == TokenType::kName) {
    Next();
    name += "." + Next().text;
  }
  auto e = NewExpr(ExprKind::kFilter, pos);
  e->name = std::move(name);
  e->children.push_back(std::move(node));
  if (IsOp("(")) KV_RETURN_IF_ERROR(ParseCallArgs(e.get()));
  return e;
}

StatusOr<ExprPtr> Parser::ParseTest(ExprPtr node) {
  const SourcePos pos = Next().pos;  // 'is'
  auto e = NewExpr(ExprKind::kTest, pos);
  e->negated = SkipName("not");
  KV_ASSIGN_OR_RETURN(e->name, ExpectName());
  while (IsOp(".") && Peek(1).type == TokenType::kName) {
    Next();
    e->name += "." + Next().text;
  }
  e->children.push_back(std::move(node));
  const Token& t = Peek();
  if (IsOp("(")) {
    KV_RETURN_IF_ERROR(ParseCallArgs(e.get()));
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInt || t.type == TokenType::kFloat ||
              IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is"))
      return Error(t, "You cannot chain multiple tests with is");
    KV_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    KV_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->children.push_back(std::move(arg));
  }
  return e;
}

Status Parser::ParseCallArgs(Expr* call) {
  KV_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!SkipOp(")")) {
    if (!first) {
      KV_RETURN_IF_ERROR(ExpectOp(","));
      if (SkipOp(")")) break;
    }
    first = false;
    if (IsOp("*") || IsOp("**")) {
      return Error(Peek(), "*args and **kwargs in calls are not supported");
    }
    if (Peek().type == TokenType::kName && IsOp("=", 1)) {
      std::string name = Next().text;
      Next();
      KV_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->kwargs.emplace_back(std::move(name), std::move(value));
      continue;
    }
    KV_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    call->children.push_back(std::move(value));
  }
  return Status::Ok();
}

}  // namespace kvault::jinja
