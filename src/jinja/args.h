// ArgReader: binds call arguments to a Python-style parameter list, so
// filters, tests, methods and globals read `indent(4, first=true)` alike.
#ifndef KVAULT_JINJA_ARGS_H_
#define KVAULT_JINJA_ARGS_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

class ArgReader {
 public:
  // Binds `args` to `params` (positional first, then by keyword).
  ArgReader(std::string_view function, const CallArgs& args,
            std::initializer_list<std::string_view> params);

  // TypeError for too many positional or unknown keyword arguments.
  const Status& status() const { return status_; }
  // True when parameter `i` was passed.
  bool Has(size_t i) const { return i < bound_.size() && bound_[i]; }
  // Returns parameter `i`, or `fallback` when it was not passed.
  Value Get(size_t i, Value fallback = Value()) const;
  // Returns parameter `i` as an int (TypeError when it is not one).
  StatusOr<int64_t> GetInt(size_t i, int64_t fallback) const;
  // Returns parameter `i` as a bool (any value: Python truthiness).
  bool GetBool(size_t i, bool fallback) const;
  // Returns parameter `i` as a str (TypeError when it is not one).
  StatusOr<std::string> GetString(size_t i, std::string fallback) const;

 private:
  std::string function_;
  std::vector<std::string_view> names_;
  std::vector<const Value*> bound_;
  Status status_;
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_ARGS_H_
