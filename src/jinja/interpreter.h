// Interpreter: walks a parsed template and writes its output, with Python
// value semantics, jinja2 scoping rules and the render limits.
#ifndef KVAULT_JINJA_INTERPRETER_H_
#define KVAULT_JINJA_INTERPRETER_H_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status_or.h"
#include "jinja/ast.h"
#include "jinja/options.h"
#include "jinja/value.h"

namespace kvault::jinja {

// One level of variables: the globals, a loop iteration, a macro call.
class Scope : public std::enable_shared_from_this<Scope> {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr)
      : parent_(std::move(parent)) {}
  // Returns the innermost binding of `name`, or nullptr.
  const Value* Find(const std::string& name) const;
  // Binds `name` in this scope.
  void Set(const std::string& name, Value value) {
    vars_.Set(name, std::move(value));
  }
  // Drops every binding (a loop reuses one scope for its iterations).
  void Clear() { vars_.Clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  // Most scopes (a loop iteration, a macro call) bind a handful of names:
  // ValueMap searches those linearly and indexes only large ones.
  ValueMap vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

// What a statement asks its enclosing loop to do.
enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `context` as top-level variables over the globals.
  Status Render(const Body& body, const ValueMap& context, std::string* out);

  // Spends `ops` of the operation budget; kLimit once it is exhausted.
  Status Charge(uint64_t ops);
  // Spends the budget for building `n` container items. Items cost more
  // than a step so that the budget also bounds memory: at most
  // max_operations / kOpsPerItem items are ever created.
  Status ChargeItems(uint64_t n);
  // Returns how many more items ChargeItems would allow.
  uint64_t ItemsLeft() const;
  // Spends the budget for building a string of `bytes` (one step per
  // kBytesPerOp), so repeated concatenation is bounded in total bytes.
  Status ChargeBytes(size_t bytes);
  // kLimit when a string or output of `bytes` would exceed the size limit.
  Status CheckSize(size_t bytes) const;

  static constexpr uint64_t kOpsPerItem = 2;
  static constexpr uint64_t kBytesPerOp = 16;
  // Calls a function value (TypeError for others, UndefinedError for
  // undefined callees).
  StatusOr<Value> Call(const Value& callee, CallArgs& args);
  // Returns a new namespace; its entries are dropped when the render ends so
  // that a namespace holding itself does not leak.
  Value NewNamespace(ValueMap map);
  const RenderOptions& options() const { return options_; }

 private:
  Status ExecBody(const Body& body, const ScopePtr& scope, std::string* out,
                  Flow* flow);
  Status Exec(const Stmt& s, const ScopePtr& scope, std::string* out,
              Flow* flow);
  Status ExecOutput(const Stmt& s, const ScopePtr& scope, std::string* out);
  // Set blocks and filter blocks: render the body, then filter it.
  Status ExecCapture(const Stmt& s, const ScopePtr& scope, std::string* out);
  Status ExecScope(const Stmt& s, const ScopePtr& scope, std::string* out,
                   Flow* flow);
  Status ExecIf(const Stmt& s, const ScopePtr& scope, std::string* out,
                Flow* flow);
  Status ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out,
                 Flow* flow);
  // The items a for-loop's `if` filter keeps (jinja2 filters before
  // counting, so loop.length and loop.last see only these).
  StatusOr<std::vector<Value>> FilterLoopItems(const Stmt& s,
                                               const ScopePtr& scope,
                                               const std::vector<Value>& items);
  Status ExecSet(const Stmt& s, const ScopePtr& scope);
  Status ExecCallBlock(const Stmt& s, const ScopePtr& scope, std::string* out);
  Status Append(std::string* out, std::string_view text);
  Status BindTargets(const std::vector<std::string>& targets,
                     const Value& value, Scope* scope);
  Value MakeMacro(const Stmt& def, const ScopePtr& scope, bool is_caller);
  StatusOr<Value> CallMacro(const Stmt& def, Scope* closure, CallArgs& args,
                            bool is_caller);

  StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalName(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalContainer(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalAccess(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalSlice(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalCall(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalFilter(const Expr& e, const ScopePtr& scope,
                             const Value* input);
  StatusOr<Value> EvalTest(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalCompare(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalConcat(const Expr& e, const ScopePtr& scope);
  StatusOr<Value> EvalLogic(const Expr& e, const ScopePtr& scope);
  Status EvalArgs(const Expr& e, size_t first, const ScopePtr& scope,
                  CallArgs* args);

  RenderOptions options_;
  ScopePtr globals_;
  uint64_t ops_ = 0;
  uint64_t items_ = 0;  // container items charged so far
  int depth_ = 0;
  // Scopes that macros close over: macros hold them by raw pointer (no
  // ownership cycle through the scope that stores the macro).
  std::vector<ScopePtr> keep_alive_;
  std::vector<Value> namespaces_;
};

// Returns the UndefinedError (or SecurityError) using `u` raises.
Status UndefinedFailure(const Value& u);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_INTERPRETER_H_
