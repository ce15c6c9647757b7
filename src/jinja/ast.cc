#include "jinja/ast.h"

namespace kvault::jinja {

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto take = [&pending](Expr* e) {
    for (ExprPtr& c : e->children) {
      if (c) pending.push_back(std::move(c));
    }
    for (auto& kv : e->kwargs) {
      if (kv.second) pending.push_back(std::move(kv.second));
    }
  };
  take(this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    take(e.get());
  }  // each `e` dies here with no children left
}

}  // namespace kvault::jinja
