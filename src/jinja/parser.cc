// Statement parsing; expressions are in parser_expr.cc.
#include "jinja/parser.h"

#include <utility>

namespace kvault::jinja {
namespace {

StmtPtr NewStmt(StmtKind kind, SourcePos pos) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->pos = pos;
  return s;
}

std::string JoinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += " or ";
    out += "'" + std::string(names[i]) + "'";
  }
  return out;
}

}  // namespace

StatusOr<Body> Parser::ParseTemplate() {
  Body body;
  KV_RETURN_IF_ERROR(ParseBody({}, &body));
  if (Peek().type != TokenType::kEof) return Unexpected("end of template");
  return body;
}

Status Parser::ParseBody(std::initializer_list<std::string_view> ends,
                         Body* out) {
  KV_RETURN_IF_ERROR(Enter());
  std::vector<std::string_view> saved(ends);
  std::swap(saved, ends_);
  Status status;
  while (status.ok()) {
    const Token& t = Peek();
    if (t.type == TokenType::kEof) {
      if (ends.size() > 0) {
        status = Error(
            t, "unexpected end of template, expected " + JoinNames(ends_));
      }
      break;
    }
    if (t.type == TokenType::kText) {
      auto s = NewStmt(StmtKind::kText, t.pos);
      s->text = Next().text;
      out->push_back(std::move(s));
    } else if (t.type == TokenType::kVarBegin) {
      auto s = NewStmt(StmtKind::kOutput, Next().pos);
      StatusOr<ExprPtr> e = ParseTuple(false);
      if (!e.ok()) {
        status = e.status();
        break;
      }
      s->expr = std::move(*e);
      if (Peek().type != TokenType::kVarEnd) {
        status = Unexpected("end of print statement");
        break;
      }
      Next();
      out->push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& name = Peek(1);
      bool is_end = false;
      for (std::string_view e : ends) is_end |= IsName(e, 1);
      if (is_end) break;
      (void)name;
      StatusOr<StmtPtr> s = ParseStatement();
      if (!s.ok()) {
        status = s.status();
        break;
      }
      if (*s) out->push_back(std::move(*s));
    } else {
      status = Unexpected("template data or a tag");
    }
  }
  std::swap(saved, ends_);
  Leave();
  return status;
}

StatusOr<StmtPtr> Parser::ParseStatement() {
  const SourcePos pos = Next().pos;  // {%
  const Token& t = Peek();
  if (t.type != TokenType::kName) return Unexpected("statement name");
  const std::string name = Next().text;
  if (name == "if") return ParseIf(pos);
  if (name == "for") return ParseFor(pos);
  if (name == "set") return ParseSet(pos);
  if (name == "macro") return ParseMacro(pos);
  if (name == "call") return ParseCallBlock(pos);
  if (name == "filter") return ParseFilterBlock(pos);
  if (name == "generation") return ParseScope(pos, false);
  if (name == "with") return ParseScope(pos, true);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) {
      return Error(tokens_[at_ - 1], "'" + name + "' outside of a loop");
    }
    KV_RETURN_IF_ERROR(ExpectBlockEnd());
    return NewStmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue,
                   pos);
  }
  const Token& bad = tokens_[at_ - 1];
  if (!ends_.empty()) {
    return Error(bad,
                 "expected " + JoinNames(ends_) + ", found '" + name + "'");
  }
  return Error(bad, "Encountered unknown tag '" + name + "'.");
}

StatusOr<StmtPtr> Parser::ParseIf(SourcePos pos) {
  auto s = NewStmt(StmtKind::kIf, pos);
  KV_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false));
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  while (true) {
    Body body;
    KV_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &body));
    s->branches.emplace_back(std::move(cond), std::move(body));
    Next();  // {%
    const std::string tag = Next().text;
    if (tag == "endif") {
      KV_RETURN_IF_ERROR(ExpectBlockEnd());
      break;
    }
    if (tag == "elif") {
      KV_ASSIGN_OR_RETURN(cond, ParseTuple(false));
      KV_RETURN_IF_ERROR(ExpectBlockEnd());
      continue;
    }
    KV_RETURN_IF_ERROR(ExpectBlockEnd());  // else
    Body else_body;
    KV_RETURN_IF_ERROR(ParseBody({"endif"}, &else_body));
    s->branches.emplace_back(nullptr, std::move(else_body));
    KV_RETURN_IF_ERROR(ExpectEndTag("endif"));
    break;
  }
  return s;
}

StatusOr<StmtPtr> Parser::ParseFor(SourcePos pos) {
  auto s = NewStmt(StmtKind::kFor, pos);
  KV_RETURN_IF_ERROR(ParseTargets(&s->targets));
  if (!SkipName("in")) return Unexpected("'in'");
  KV_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, /*with_condexpr=*/false));
  if (SkipName("if")) {
    KV_ASSIGN_OR_RETURN(s->filter, ParseExpression());
  }
  s->recursive = SkipName("recursive");
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  const bool saw_outer = saw_loop_name_;
  saw_loop_name_ = false;
  ++loop_depth_;
  Status st = ParseBody({"endfor", "else"}, &s->body);
  --loop_depth_;
  KV_RETURN_IF_ERROR(st);
  s->uses_loop = saw_loop_name_;
  saw_loop_name_ = saw_outer || saw_loop_name_;
  if (IsName("else", 1)) {
    Next();
    Next();
    KV_RETURN_IF_ERROR(ExpectBlockEnd());
    KV_RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body));
  }
  KV_RETURN_IF_ERROR(ExpectEndTag("endfor"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseSet(SourcePos pos) {
  auto s = NewStmt(StmtKind::kSet, pos);
  if (Peek().type == TokenType::kName && IsOp(".", 1)) {
    s->targets.push_back(Next().text);
    Next();
    KV_ASSIGN_OR_RETURN(s->attr, ExpectName());
  } else {
    KV_RETURN_IF_ERROR(ParseTargets(&s->targets));
  }
  if (SkipOp("=")) {
    KV_ASSIGN_OR_RETURN(s->expr, ParseTuple(false));
    KV_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }
  if (s->targets.size() != 1 || !s->attr.empty()) return Unexpected("'='");
  s->kind = StmtKind::kSetBlock;
  ExprPtr chain;
  while (SkipOp("|")) {
    KV_ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
  }
  s->filter = std::move(chain);
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  KV_RETURN_IF_ERROR(ParseBody({"endset"}, &s->body));
  KV_RETURN_IF_ERROR(ExpectEndTag("endset"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseMacro(SourcePos pos) {
  auto s = NewStmt(StmtKind::kMacro, pos);
  KV_ASSIGN_OR_RETURN(s->name, ExpectName());
  KV_RETURN_IF_ERROR(ParseParams(&s->params));
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  const bool outer_varargs = saw_varargs_name_, outer_kwargs = saw_kwargs_name_;
  saw_varargs_name_ = saw_kwargs_name_ = false;
  Status st = ParseBody({"endmacro"}, &s->body);
  loop_depth_ = saved_loops;
  s->uses_varargs = saw_varargs_name_;
  s->uses_kwargs = saw_kwargs_name_;
  // A macro nested in a macro body may read the outer one's names.
  saw_varargs_name_ = outer_varargs || saw_varargs_name_;
  saw_kwargs_name_ = outer_kwargs || saw_kwargs_name_;
  KV_RETURN_IF_ERROR(st);
  KV_RETURN_IF_ERROR(ExpectEndTag("endmacro"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseCallBlock(SourcePos pos) {
  auto s = NewStmt(StmtKind::kCallBlock, pos);
  if (IsOp("(")) KV_RETURN_IF_ERROR(ParseParams(&s->params));
  KV_ASSIGN_OR_RETURN(s->expr, ParseExpression());
  if (s->expr->kind != ExprKind::kCall) {
    return Error(tokens_[at_ - 1], "expected call");
  }
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  const bool outer_varargs = saw_varargs_name_, outer_kwargs = saw_kwargs_name_;
  saw_varargs_name_ = saw_kwargs_name_ = false;
  Status st = ParseBody({"endcall"}, &s->body);
  loop_depth_ = saved_loops;
  s->uses_varargs = saw_varargs_name_;
  s->uses_kwargs = saw_kwargs_name_;
  saw_varargs_name_ = outer_varargs || saw_varargs_name_;
  saw_kwargs_name_ = outer_kwargs || saw_kwargs_name_;
  KV_RETURN_IF_ERROR(st);
  KV_RETURN_IF_ERROR(ExpectEndTag("endcall"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseFilterBlock(SourcePos pos) {
  auto s = NewStmt(StmtKind::kFilterBlock, pos);
  ExprPtr chain;
  KV_ASSIGN_OR_RETURN(chain, ParseFilter(nullptr));
  while (SkipOp("|")) {
    KV_ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
  }
  s->expr = std::move(chain);
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  KV_RETURN_IF_ERROR(ParseBody({"endfilter"}, &s->body));
  KV_RETURN_IF_ERROR(ExpectEndTag("endfilter"));
  return s;
}

StatusOr<StmtPtr> Parser::ParseScope(SourcePos pos, bool with) {
  auto s = NewStmt(StmtKind::kScope, pos);
  while (with && Peek().type == TokenType::kName) {
    KV_ASSIGN_OR_RETURN(std::string name, ExpectName());
    KV_RETURN_IF_ERROR(ExpectOp("="));
    KV_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    s->params.emplace_back(std::move(name), std::move(value));
    if (!SkipOp(",")) break;
  }
  KV_RETURN_IF_ERROR(ExpectBlockEnd());
  const char* end = with ? "endwith" : "endgeneration";
  KV_RETURN_IF_ERROR(ParseBody({end}, &s->body));
  KV_RETURN_IF_ERROR(ExpectEndTag(end));
  return s;
}

Status Parser::ParseParams(
    std::vector<std::pair<std::string, ExprPtr>>* params) {
  KV_RETURN_IF_ERROR(ExpectOp("("));
  while (!SkipOp(")")) {
    if (!params->empty()) KV_RETURN_IF_ERROR(ExpectOp(","));
    if (SkipOp(")")) break;
    KV_ASSIGN_OR_RETURN(std::string name, ExpectName());
    ExprPtr def;
    if (SkipOp("=")) {
      KV_ASSIGN_OR_RETURN(def, ParseExpression());
    }
    params->emplace_back(std::move(name), std::move(def));
  }
  return Status::Ok();
}

Status Parser::ParseTargets(std::vector<std::string>* names) {
  const bool parens = SkipOp("(");
  do {
    if (parens && IsOp(")")) break;
    KV_ASSIGN_OR_RETURN(std::string name, ExpectName());
    names->push_back(std::move(name));
  } while (SkipOp(","));
  if (parens) KV_RETURN_IF_ERROR(ExpectOp(")"));
  return Status::Ok();
}

Status Parser::ExpectEndTag(std::string_view name) {
  if (Peek().type != TokenType::kBlockBegin || !IsName(name, 1)) {
    return Unexpected("'" + std::string(name) + "'");
  }
  Next();
  Next();
  return ExpectBlockEnd();
}

const Token& Parser::Peek(size_t ahead) const {
  const size_t i = std::min(at_ + ahead, tokens_.size() - 1);
  return tokens_[i];
}

const Token& Parser::Next() {
  const Token& t = tokens_[at_];
  if (at_ + 1 < tokens_.size()) ++at_;
  return t;
}

bool Parser::IsOp(std::string_view op, size_t ahead) const {
  const Token& t = Peek(ahead);
  return t.type == TokenType::kOp && t.text == op;
}

bool Parser::IsName(std::string_view name, size_t ahead) const {
  const Token& t = Peek(ahead);
  return t.type == TokenType::kName && t.text == name;
}

bool Parser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

Status Parser::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return Status::Ok();
  return Unexpected("'" + std::string(op) + "'");
}

StatusOr<std::string> Parser::ExpectName() {
  if (Peek().type != TokenType::kName) return Unexpected("name");
  return Next().text;
}

Status Parser::ExpectBlockEnd() {
  if (Peek().type != TokenType::kBlockEnd) {
    return Unexpected("end of statement block");
  }
  Next();
  return Status::Ok();
}

Status Parser::Error(const Token& at, std::string message) const {
  return WithPosition(JinjaError(ErrorKind::kSyntax, std::move(message)),
                      at.pos);
}

Status Parser::Unexpected(std::string_view expected) const {
  return Error(Peek(), "expected " + std::string(expected) + ", found " +
                           DescribeToken(Peek()));
}

Status Parser::Enter() {
  if (++depth_ > max_depth_) {
    --depth_;
    return Error(Peek(), "template nesting exceeds the depth limit of " +
                             std::to_string(max_depth_));
  }
  return Status::Ok();
}

}  // namespace kvault::jinja
