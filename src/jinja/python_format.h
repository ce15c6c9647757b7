// Python's text forms of values: str(), repr(), float repr and the
// json.dumps that chat templates reach through `tojson`.
#ifndef KVAULT_JINJA_PYTHON_FORMAT_H_
#define KVAULT_JINJA_PYTHON_FORMAT_H_

#include <optional>
#include <string>
#include <string_view>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

// Returns Python's repr(float): shortest round-trip digits, "1.0", "1e-05",
// "1e+16", "inf", "nan".
std::string FloatRepr(double d);

// Returns Python's repr(str): single quotes unless the text has ' and no ".
std::string StringRepr(std::string_view s);

// Largest text Repr/ToStr build before giving up: nested shared lists can
// describe exponentially long text in little memory.
inline constexpr size_t kDefaultTextLimit = size_t{16} << 20;

// Appends Python's repr() of `v` to `out` (Undefined reprs as "Undefined");
// returns false once `out` would exceed `limit` bytes.
bool AppendRepr(const Value& v, size_t limit, std::string* out);

// Returns Python's repr() of `v`, cut short past kDefaultTextLimit.
std::string Repr(const Value& v);

// Appends Python's str() of `v` as `{{ v }}` prints it (Undefined is "");
// returns false once `out` would exceed `limit` bytes.
bool AppendStr(const Value& v, size_t limit, std::string* out);

// Returns Python's str() of `v`, cut short past kDefaultTextLimit.
std::string ToStr(const Value& v);

// Returns the Python class name, e.g. "str", "NoneType", "generator".
std::string TypeName(const Value& v);

// Returns jinja2's object_type_repr: "None", "dict object", "str object".
std::string ObjectTypeRepr(const Value& v);

// The arguments of json.dumps that `tojson` passes through.
struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: single line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Returns json.dumps(v, ...); TypeError for values JSON cannot hold,
// kLimit past `limit` bytes.
StatusOr<std::string> DumpJson(const Value& v, const JsonOptions& options,
                               size_t limit = kDefaultTextLimit);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_PYTHON_FORMAT_H_
