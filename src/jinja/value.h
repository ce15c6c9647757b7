// Value: a Python object as a Jinja template sees it (None, bool, int, float,
// str, list, tuple, dict, callables, jinja2's Undefined and Namespace).
// Containers are shared by reference as in Python; the immutable sandbox
// means only a Namespace is ever changed after construction.
#ifndef KVAULT_JINJA_VALUE_H_
#define KVAULT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/status_or.h"
#include "jinja/error.h"

namespace kvault::jinja {

class Value;
class Interpreter;

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kGenerator,  // result of map/select/...: iterable, not JSON-serialisable
  kDict,
  kNamespace,
  kFunction,
};

class ValueMap;
struct CallArgs;
struct Function;

using NativeFn = std::function<StatusOr<Value>(Interpreter&, CallArgs&)>;

class Value {
 public:
  // Constructs an Undefined for a missing variable (no hint).
  Value() = default;

  // An Undefined whose use fails with `kind` and `hint` as the message.
  static Value Undefined(std::string hint,
                         ErrorKind kind = ErrorKind::kUndefined);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Generator(std::vector<Value> items);
  static Value Dict(ValueMap map);
  static Value Namespace(ValueMap map);
  static Value Func(std::string name, NativeFn fn, bool is_macro = false);
  // Converts parsed JSON (objects keep their key order).
  static Value FromJson(const nlohmann::ordered_json& json);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  // True for int, float and bool (Python's numbers.Number).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  // True for list, tuple and generator: things with items().
  bool is_list_like() const {
    return kind_ == ValueKind::kList || kind_ == ValueKind::kTuple ||
           kind_ == ValueKind::kGenerator;
  }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_namespace() const { return kind_ == ValueKind::kNamespace; }
  bool is_function() const { return kind_ == ValueKind::kFunction; }

  bool bool_value() const { return std::get<bool>(data_); }
  int64_t int_value() const { return std::get<int64_t>(data_); }
  // Returns an int, float or bool as a double.
  double AsDouble() const;
  const std::string& str() const;
  // Items of a list, tuple or generator.
  const std::vector<Value>& items() const;
  // Entries of a dict or namespace.
  const ValueMap& map() const;
  // The namespace's entries, for `{% set ns.x = ... %}`.
  ValueMap& mutable_map() const;
  const Function& function() const;
  // The message an Undefined fails with ("" for a plain missing variable).
  const std::string& undefined_hint() const;
  ErrorKind undefined_kind() const;

  // Python truthiness.
  bool Truthy() const;
  // Container nesting (0 for scalars): bounded by the renderer so freeing a
  // value never recurses deeper than the stack allows.
  int depth() const { return depth_; }

 private:
  using Data =
      std::variant<std::monostate, bool, int64_t, double,
                   std::shared_ptr<const std::string>,
                   std::shared_ptr<const std::vector<Value>>,
                   std::shared_ptr<ValueMap>, std::shared_ptr<const Function>>;
  ValueKind kind_ = ValueKind::kUndefined;
  Data data_;
  // Only for Undefined: what failed, so errors name it.
  ErrorKind undefined_kind_ = ErrorKind::kUndefined;
  int depth_ = 0;
};

// Insertion-ordered str -> Value mapping (Python dicts keep insertion order,
// and chat templates print tool schemas in request order).
class ValueMap {
 public:
  // Returns the value of `key`, or nullptr when absent.
  const Value* Find(std::string_view key) const;
  // Inserts `key` or overwrites its value in place (keeping its position).
  void Set(std::string key, Value value);
  // Returns the number of entries.
  size_t size() const { return entries_.size(); }
  // Makes room for `n` entries (one allocation instead of several).
  void Reserve(size_t n) { entries_.reserve(n); }
  // Removes every entry, keeping the storage for reuse.
  void Clear();
  // Returns the entries in insertion order; keys are KeyOf() strings.
  const std::vector<std::pair<std::string, Value>>& entries() const {
    return entries_;
  }

  // Python dict literals may use non-str keys ({1024: 256}). They are stored
  // under a tagged string so that lookups stay string-based, and the
  // original key is kept for iteration, repr and sorting.
  // Returns the storage string of `key` (a str key is itself).
  static std::string KeyOf(const Value& key);
  // Inserts or overwrites an entry under any hashable `key`.
  void SetKey(const Value& key, Value value);
  // Returns the value stored under `key`, or nullptr.
  const Value* FindKey(const Value& key) const;
  // Returns the original key of entry `i`.
  Value KeyAt(size_t i) const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  // Looks keys up by string_view without building a std::string.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view k) const {
      return std::hash<std::string_view>()(k);
    }
  };
  // Built once the map is large enough that linear search would hurt.
  std::unordered_map<std::string, size_t, KeyHash, std::equal_to<>> index_;
  // Empty unless a non-str key was inserted; then one per entry (Undefined
  // for str keys).
  std::vector<Value> special_keys_;
  bool has_special_keys_ = false;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A callable: a global, a bound method, a macro, caller(), loop.cycle.
struct Function {
  std::string name;
  NativeFn call;
  bool is_macro = false;
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_VALUE_H_
