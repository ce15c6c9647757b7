// The syntax tree of a parsed template. Nodes are plain structs owned by
// their parent; the renderer walks them (the tree outlives every render).
#ifndef KVAULT_JINJA_AST_H_
#define KVAULT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/error.h"
#include "jinja/value.h"

namespace kvault::jinja {

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // children: items
  kTuple,     // children: items
  kDict,      // children: key0, value0, key1, value1, ...
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children[0][c1:c2:c3], absent parts are null
  kCall,      // children[0](children[1..], kwargs)
  kFilter,    // children[0] | name(children[1..], kwargs); [0] null in blocks
  kTest,      // children[0] is [not] name(children[1..], kwargs)
  kNeg,       // -children[0]
  kPos,       // +children[0]
  kNot,       // not children[0]
  kBinary,    // children[0] name children[1]: + - * / // % **
  kConcat,    // children joined with ~
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
  kAnd,       // children[0] and children[1]
  kOr,        // children[0] or children[1]
  kCondExpr,  // children[0] if children[1] else children[2] (may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Frees children iteratively: `1+1+1+...` builds a left-leaning chain as
  // deep as the input is long, and recursive destruction would overflow.
  ~Expr();

  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches: (condition, body); a null condition is else
  kFor,          // for targets in expr [if filter] body [else else_body]
  kSet,          // set targets = expr / set target.attr = expr
  kSetBlock,     // set name [| filter] %} body {% endset
  kMacro,        // macro name(params) body
  kCallBlock,    // call[(params)] expr %} body {% endcall
  kFilterBlock,  // filter expr %} body {% endfilter  (expr: kFilter chain)
  kBreak,
  kContinue,
  kScope,  // generation / with: body in a nested scope
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;  // for/set names; set block name
  std::string attr;                  // `{% set ns.attr = %}`
  ExprPtr filter;                    // for-loop `if`; set-block filter
  bool recursive = false;
  bool uses_loop = false;  // the for body names `loop` (else it is not built)
  // The macro body names `varargs` / `kwargs` (else they are not bound).
  bool uses_varargs = false;
  bool uses_kwargs = false;
  Body body;
  Body else_body;
  std::string name;                                     // macro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro/with params
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_AST_H_
