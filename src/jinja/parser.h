// Parser: tokens -> syntax tree, following jinja2's grammar and operator
// precedence (or < and < not < comparisons < + - < ~ < * / // % < ** <
// unary minus < filters/tests < postfix). Nesting is bounded by max_depth so
// hostile input cannot exhaust the stack.
#ifndef KVAULT_JINJA_PARSER_H_
#define KVAULT_JINJA_PARSER_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kvault::jinja {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  // Returns the template's top-level statements or the first syntax error.
  StatusOr<Body> ParseTemplate();

 private:
  // Statements (parser.cc).
  Status ParseBody(std::initializer_list<std::string_view> ends, Body* out);
  StatusOr<StmtPtr> ParseStatement();
  StatusOr<StmtPtr> ParseIf(SourcePos pos);
  StatusOr<StmtPtr> ParseFor(SourcePos pos);
  StatusOr<StmtPtr> ParseSet(SourcePos pos);
  StatusOr<StmtPtr> ParseMacro(SourcePos pos);
  StatusOr<StmtPtr> ParseCallBlock(SourcePos pos);
  StatusOr<StmtPtr> ParseFilterBlock(SourcePos pos);
  StatusOr<StmtPtr> ParseScope(SourcePos pos, bool with);
  Status ParseParams(std::vector<std::pair<std::string, ExprPtr>>* params);
  Status ParseTargets(std::vector<std::string>* names);
  // Consumes `{% name %}` ending a block (after ParseBody stopped at it).
  Status ExpectEndTag(std::string_view name);

  // Expressions (parser_expr.cc).
  StatusOr<ExprPtr> ParseTuple(bool allow_empty, bool with_condexpr = true);
  StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  StatusOr<ExprPtr> ParseOr();
  StatusOr<ExprPtr> ParseAnd();
  StatusOr<ExprPtr> ParseNot();
  StatusOr<ExprPtr> ParseCompare();
  StatusOr<ExprPtr> ParseMath1();
  StatusOr<ExprPtr> ParseConcat();
  StatusOr<ExprPtr> ParseMath2();
  StatusOr<ExprPtr> ParsePow();
  StatusOr<ExprPtr> ParseUnary(bool with_filter);
  StatusOr<ExprPtr> ParsePrimary();
  StatusOr<ExprPtr> ParseListOrDict(bool dict);
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  StatusOr<ExprPtr> ParseFilter(ExprPtr node);
  StatusOr<ExprPtr> ParseTest(ExprPtr node);
  Status ParseCallArgs(Expr* call);

  // Token helpers.
  const Token& Peek(size_t ahead = 0) const;
  const Token& Next();
  bool IsOp(std::string_view op, size_t ahead = 0) const;
  bool IsName(std::string_view name, size_t ahead = 0) const;
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  Status ExpectOp(std::string_view op);
  StatusOr<std::string> ExpectName();
  Status ExpectBlockEnd();
  Status Error(const Token& at, std::string message) const;
  Status Unexpected(std::string_view expected) const;
  // Counts one level of nesting; fails past max_depth.
  Status Enter();
  void Leave() { --depth_; }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool saw_varargs_name_ = false;  // a Name `varargs` / `kwargs` was parsed
  bool saw_kwargs_name_ = false;   // (in the current macro body)
  bool saw_loop_name_ = false;  // a Name `loop` was parsed  // for-loops around
                                // the current statement
  std::vector<std::string_view> ends_;  // tags closing the current body
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_PARSER_H_
