// Statement execution; expression evaluation is in interpreter_expr.cc.
#include "jinja/interpreter.h"

#include <optional>
#include <utility>

#include "jinja/globals.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/python_format.h"

namespace kvault::jinja {
namespace {

// Deepest container a namespace attribute may hold: freeing values recurses
// once per level, so this bounds the stack a render's values can need.
constexpr int kMaxValueDepth = 512;

}  // namespace

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    if (const Value* v = s->vars_.Find(name)) return v;
  }
  return nullptr;
}

Status UndefinedFailure(const Value& u) {
  std::string hint = u.undefined_hint();
  if (hint.empty()) hint = "undefined value";
  return JinjaError(u.undefined_kind(), std::move(hint));
}

Interpreter::Interpreter(const RenderOptions& options) : options_(options) {}

Interpreter::~Interpreter() {
  // Break any cycle a namespace formed through its own attributes.
  for (Value& ns : namespaces_) ns.mutable_map() = ValueMap();
}

Status Interpreter::Render(const Body& body, const ValueMap& context,
                           std::string* out) {
  globals_ = std::make_shared<Scope>();
  const ValueMap globals = MakeGlobals();
  for (const auto& [name, fn] : globals.entries()) globals_->Set(name, fn);
  auto top = std::make_shared<Scope>(globals_);
  for (const auto& [name, v] : context.entries()) top->Set(name, v);
  keep_alive_.push_back(top);
  Flow flow = Flow::kNormal;
  return ExecBody(body, top, out, &flow);
}

Status Interpreter::Charge(uint64_t ops) {
  if (ops > options_.max_operations || ops_ + ops > options_.max_operations) {
    ops_ = options_.max_operations;
    return JinjaError(ErrorKind::kLimit,
                      "template exceeded the operation budget of " +
                          std::to_string(options_.max_operations));
  }
  ops_ += ops;
  return Status::Ok();
}

Status Interpreter::ChargeItems(uint64_t n) {
  if (n > ItemsLeft()) {
    items_ = options_.max_items;
    return JinjaError(ErrorKind::kLimit,
                      "template built more than " +
                          std::to_string(options_.max_items) +
                          " container items (the item limit)");
  }
  items_ += n;
  if (n > options_.max_operations) return Charge(options_.max_operations + 1);
  return Charge(n * kOpsPerItem);
}

uint64_t Interpreter::ItemsLeft() const {
  return options_.max_items > items_ ? options_.max_items - items_ : 0;
}

Status Interpreter::ChargeBytes(size_t bytes) {
  return Charge(bytes / kBytesPerOp);
}

Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes <= options_.max_output_bytes) return Status::Ok();
  return JinjaError(ErrorKind::kLimit,
                    "template output or string exceeds the limit of " +
                        std::to_string(options_.max_output_bytes) + " bytes");
}

Value Interpreter::NewNamespace(ValueMap map) {
  Value ns = Value::Namespace(std::move(map));
  namespaces_.push_back(ns);
  return ns;
}

Status Interpreter::Append(std::string* out, std::string_view text) {
  KV_RETURN_IF_ERROR(CheckSize(out->size() + text.size()));
  KV_RETURN_IF_ERROR(ChargeBytes(text.size()));
  out->append(text);
  return Status::Ok();
}

Status Interpreter::ExecBody(const Body& body, const ScopePtr& scope,
                             std::string* out, Flow* flow) {
  for (const StmtPtr& s : body) {
    KV_RETURN_IF_ERROR(Exec(*s, scope, out, flow));
    if (*flow != Flow::kNormal) break;
  }
  return Status::Ok();
}

Status Interpreter::Exec(const Stmt& s, const ScopePtr& scope, std::string* out,
                         Flow* flow) {
  KV_RETURN_IF_ERROR(Charge(1));
  if (++depth_ > options_.max_depth) {
    --depth_;
    return WithPosition(JinjaError(ErrorKind::kLimit,
                                   "template recursion exceeds the depth "
                                   "limit of " +
                                       std::to_string(options_.max_depth)),
                        s.pos);
  }
  Status st;
  switch (s.kind) {
    case StmtKind::kText:
      st = Append(out, s.text);
      break;
    case StmtKind::kOutput:
      st = ExecOutput(s, scope, out);
      break;
    case StmtKind::kIf:
      st = ExecIf(s, scope, out, flow);
      break;
    case StmtKind::kFor:
      st = ExecFor(s, scope, out, flow);
      break;
    case StmtKind::kSet:
      st = ExecSet(s, scope);
      break;
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock:
      st = ExecCapture(s, scope, out);
      break;
    case StmtKind::kMacro:
      scope->Set(s.name, MakeMacro(s, scope, false));
      break;
    case StmtKind::kCallBlock:
      st = ExecCallBlock(s, scope, out);
      break;
    case StmtKind::kBreak:
      *flow = Flow::kBreak;
      break;
    case StmtKind::kContinue:
      *flow = Flow::kContinue;
      break;
    case StmtKind::kScope:
      st = ExecScope(s, scope, out, flow);
      break;
  }
  --depth_;
  return WithPosition(st, s.pos);
}

Status Interpreter::ExecOutput(const Stmt& s, const ScopePtr& scope,
                               std::string* out) {
  KV_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
  // Strings (literals, macro output) go straight in, without a copy.
  if (v.is_string()) return Append(out, v.str());
  std::string text;
  if (!AppendStr(v, options_.max_output_bytes, &text)) {
    return CheckSize(options_.max_output_bytes + 1);
  }
  return Append(out, text);
}

Status Interpreter::ExecCapture(const Stmt& s, const ScopePtr& scope,
                                std::string* out) {
  std::string captured;
  Flow inner = Flow::kNormal;
  KV_RETURN_IF_ERROR(ExecBody(s.body, scope, &captured, &inner));
  const Value text = Value::String(std::move(captured));
  const Expr* chain =
      s.kind == StmtKind::kSetBlock ? s.filter.get() : s.expr.get();
  Value result = text;
  if (chain) {
    KV_ASSIGN_OR_RETURN(result, EvalFilter(*chain, scope, &text));
  }
  if (s.kind == StmtKind::kSetBlock) {
    scope->Set(s.targets[0], std::move(result));
    return Status::Ok();
  }
  return Append(out, ToStr(result));
}

Status Interpreter::ExecScope(const Stmt& s, const ScopePtr& scope,
                              std::string* out, Flow* flow) {
  auto inner = std::make_shared<Scope>(scope);
  for (const auto& [name, expr] : s.params) {
    KV_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    inner->Set(name, std::move(v));
  }
  return ExecBody(s.body, inner, out, flow);
}

Status Interpreter::ExecIf(const Stmt& s, const ScopePtr& scope,
                           std::string* out, Flow* flow) {
  for (const auto& [cond, body] : s.branches) {
    if (cond) {
      KV_ASSIGN_OR_RETURN(Value v, Eval(*cond, scope));
      if (!v.Truthy()) continue;
    }
    return ExecBody(body, scope, out, flow);
  }
  return Status::Ok();
}

Status Interpreter::BindTargets(const std::vector<std::string>& targets,
                                const Value& value, Scope* scope) {
  if (targets.size() == 1) {
    scope->Set(targets[0], value);
    return Status::Ok();
  }
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  if (items.size() != targets.size()) {
    return JinjaError(ErrorKind::kValue,
                      items.size() > targets.size()
                          ? "too many values to unpack (expected " +
                                std::to_string(targets.size()) + ")"
                          : "not enough values to unpack (expected " +
                                std::to_string(targets.size()) + ", got " +
                                std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) scope->Set(targets[i], items[i]);
  return Status::Ok();
}

// Returns an empty scope under `parent`: `previous` cleared when nothing
// kept it (a macro defined in a loop body keeps its iteration's scope),
// else a new one. Loops run one scope through their iterations this way.
static ScopePtr FreshScope(ScopePtr previous, const ScopePtr& parent) {
  if (previous != nullptr && previous.use_count() == 1) {
    previous->Clear();
    return previous;
  }
  return std::make_shared<Scope>(parent);
}

// Returns the `loop` variable of iteration `i` over `items`.
static Value LoopObject(const std::vector<Value>& items, int64_t i,
                        const Value& cycle, const Value& changed) {
  const int64_t n = static_cast<int64_t>(items.size());
  ValueMap loop;
  loop.Reserve(13);
  loop.Set("index0", Value::Int(i));
  loop.Set("index", Value::Int(i + 1));
  loop.Set("revindex0", Value::Int(n - i - 1));
  loop.Set("revindex", Value::Int(n - i));
  loop.Set("first", Value::Bool(i == 0));
  loop.Set("last", Value::Bool(i == n - 1));
  loop.Set("length", Value::Int(n));
  loop.Set("depth", Value::Int(1));
  loop.Set("depth0", Value::Int(0));
  if (i > 0) loop.Set("previtem", items[i - 1]);
  if (i + 1 < n) loop.Set("nextitem", items[i + 1]);
  loop.Set("cycle", cycle);
  loop.Set("changed", changed);
  return Value::Dict(std::move(loop));
}

StatusOr<std::vector<Value>> Interpreter::FilterLoopItems(
    const Stmt& s, const ScopePtr& scope, const std::vector<Value>& items) {
  std::vector<Value> kept;
  ScopePtr probe;
  for (const Value& item : items) {
    probe = FreshScope(std::move(probe), scope);
    KV_RETURN_IF_ERROR(BindTargets(s.targets, item, probe.get()));
    KV_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter, probe));
    if (keep.Truthy()) kept.push_back(item);
  }
  return kept;
}

Status Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope,
                            std::string* out, Flow* flow) {
  KV_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, scope));
  // Lists are iterated in place; other iterables are materialised.
  std::vector<Value> owned;
  const std::vector<Value>* source = &iterable.items();
  if (!iterable.is_list_like()) {
    KV_ASSIGN_OR_RETURN(owned, Iterate(iterable));
    source = &owned;
  }
  // An iteration allocates a scope and binds names: a few steps each.
  KV_RETURN_IF_ERROR(ChargeItems(source->size()));
  if (s.filter) {
    KV_ASSIGN_OR_RETURN(owned, FilterLoopItems(s, scope, *source));
    source = &owned;
  }
  const std::vector<Value>& items = *source;
  const int64_t n = static_cast<int64_t>(items.size());
  // One cycle() per loop; it reads the current index through `at`.
  auto at = std::make_shared<int64_t>(0);
  const Value cycle = Value::Func(
      "cycle", [at](Interpreter&, CallArgs& args) -> StatusOr<Value> {
        if (args.positional.empty()) {
          return JinjaError(ErrorKind::kType, "no items for cycling given");
        }
        return args.positional[*at % args.positional.size()];
      });
  // loop.changed(*values): true when the values differ from the last call.
  auto last = std::make_shared<std::optional<std::vector<Value>>>();
  const Value changed = Value::Func(
      "changed", [last](Interpreter&, CallArgs& args) -> StatusOr<Value> {
        const bool same =
            last->has_value() &&
            Equals(Value::List(**last), Value::List(args.positional));
        *last = args.positional;
        return Value::Bool(!same);
      });
  ScopePtr iter_scope;
  for (int64_t i = 0; i < n; ++i) {
    iter_scope = FreshScope(std::move(iter_scope), scope);
    KV_RETURN_IF_ERROR(BindTargets(s.targets, items[i], iter_scope.get()));
    if (s.uses_loop) {
      *at = i;
      KV_RETURN_IF_ERROR(Charge(4));
      iter_scope->Set("loop", LoopObject(items, i, cycle, changed));
    }
    Flow inner = Flow::kNormal;
    KV_RETURN_IF_ERROR(ExecBody(s.body, iter_scope, out, &inner));
    if (inner == Flow::kBreak) break;
  }
  if (n == 0 && !s.else_body.empty()) {
    return ExecBody(s.else_body, scope, out, flow);
  }
  return Status::Ok();
}

Status Interpreter::ExecSet(const Stmt& s, const ScopePtr& scope) {
  KV_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
  if (s.attr.empty()) return BindTargets(s.targets, v, scope.get());
  const Value* target = scope->Find(s.targets[0]);
  if (!target || !target->is_namespace()) {
    return JinjaError(ErrorKind::kTemplate,
                      "cannot assign attribute on non-namespace object");
  }
  if (v.depth() > kMaxValueDepth) {
    return JinjaError(ErrorKind::kLimit, "value nesting exceeds the limit");
  }
  target->mutable_map().Set(s.attr, std::move(v));
  return Status::Ok();
}

Value Interpreter::MakeMacro(const Stmt& def, const ScopePtr& scope,
                             bool is_caller) {
  keep_alive_.push_back(scope);
  Scope* closure = scope.get();
  const Stmt* d = &def;
  return Value::Func(
      is_caller ? "caller" : def.name,
      [d, closure, is_caller](Interpreter& ip, CallArgs& args) {
        return ip.CallMacro(*d, closure, args, is_caller);
      },
      /*is_macro=*/true);
}

namespace {

// One flag per macro parameter: inline for the usual few (no allocation on
// every call), on the heap beyond.
class SmallFlags {
 public:
  explicit SmallFlags(size_t n) {
    if (n > kInline) heap_.resize(n, 0);
  }
  char& operator[](size_t i) { return heap_.empty() ? inline_[i] : heap_[i]; }

 private:
  static constexpr size_t kInline = 16;
  char inline_[kInline] = {};
  std::vector<char> heap_;
};

}  // namespace

StatusOr<Value> Interpreter::CallMacro(const Stmt& def, Scope* closure,
                                       CallArgs& args, bool is_caller) {
  auto scope = std::make_shared<Scope>(closure->shared_from_this());
  const auto& params = def.params;
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope->Set(params[i].first, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  ValueMap kwargs;
  SmallFlags given(params.size());
  for (size_t i = 0; i < params.size() && i < args.positional.size(); ++i) {
    given[i] = true;
  }
  for (auto& [name, v] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i].first != name) ++i;
    if (i < params.size()) {
      scope->Set(name, v);
      given[i] = true;
    } else if (name == "caller" && !is_caller) {
      scope->Set("caller", v);
    } else {
      kwargs.Set(name, v);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) continue;
    if (params[i].second) {
      KV_ASSIGN_OR_RETURN(Value d, Eval(*params[i].second, scope));
      scope->Set(params[i].first, d);
    } else {
      scope->Set(params[i].first,
                 Value::Undefined("'" + params[i].first + "' is undefined"));
    }
  }
  // Bound only where the body reads them: two allocations per call saved.
  if (def.uses_varargs) scope->Set("varargs", Value::Tuple(std::move(varargs)));
  if (def.uses_kwargs) scope->Set("kwargs", Value::Dict(std::move(kwargs)));
  std::string out;
  Flow flow = Flow::kNormal;
  KV_RETURN_IF_ERROR(ExecBody(def.body, scope, &out, &flow));
  return Value::String(std::move(out));
}

Status Interpreter::ExecCallBlock(const Stmt& s, const ScopePtr& scope,
                                  std::string* out) {
  const Expr& call = *s.expr;
  KV_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], scope));
  CallArgs args;
  KV_RETURN_IF_ERROR(EvalArgs(call, 1, scope, &args));
  args.keyword.emplace_back("caller", MakeMacro(s, scope, true));
  KV_ASSIGN_OR_RETURN(Value result, Call(callee, args));
  return Append(out, ToStr(result));
}

StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return UndefinedFailure(callee);
  if (!callee.is_function()) {
    return JinjaError(ErrorKind::kType,
                      "'" + TypeName(callee) + "' object is not callable");
  }
  if (++depth_ > options_.max_depth) {
    --depth_;
    return JinjaError(ErrorKind::kLimit,
                      "template recursion exceeds the depth limit of " +
                          std::to_string(options_.max_depth));
  }
  StatusOr<Value> r = callee.function().call(*this, args);
  --depth_;
  return r;
}

}  // namespace kvault::jinja
