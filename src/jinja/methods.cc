#include "jinja/methods.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "jinja/args.h"
#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"
#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold",  "center",       "count",        "endswith",
    "find",       "format",    "index",        "isalnum",      "isalpha",
    "isdecimal",  "isdigit",   "islower",      "isnumeric",    "isspace",
    "istitle",    "isupper",   "join",         "ljust",        "lower",
    "lstrip",     "partition", "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",    "rjust",        "rpartition",   "rsplit",
    "rstrip",     "split",     "splitlines",   "startswith",   "strip",
    "swapcase",   "title",     "upper",        "zfill"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get",
                                             "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem",
                                            "setdefault", "update"};
constexpr std::string_view kListMethods[] = {"index", "count", "copy"};
constexpr std::string_view kListUnsafe[] = {
    "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool In(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

bool IsList(const Value& v) {
  return v.kind() == ValueKind::kList || v.kind() == ValueKind::kTuple;
}

Value NoAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no attribute '" +
                          name + "'");
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined("access to attribute '" + name + "' of '" +
                              TypeName(obj) + "' object is unsafe.",
                          ErrorKind::kSecurity);
}

StatusOr<Value> CallMethod(Interpreter& ip, const Value& self,
                           const std::string& name, CallArgs& args);

Value Bound(const Value& self, const std::string& name) {
  return Value::Func(name, [self, name](Interpreter& ip, CallArgs& args) {
    return CallMethod(ip, self, name, args);
  });
}

// getattr(obj, name) without the item fallback: a method, an unsafe
// attribute, or nullopt when Python has no such attribute.
std::optional<Value> PythonAttr(const Value& obj, const std::string& name) {
  if (name.starts_with("__")) return Unsafe(obj, name);
  if (obj.is_string() && In(kStrMethods, name)) return Bound(obj, name);
  if (obj.is_dict()) {
    if (In(kDictMethods, name)) return Bound(obj, name);
    if (In(kDictUnsafe, name)) return Unsafe(obj, name);
  }
  if (IsList(obj)) {
    if (In(kListMethods, name) &&
        (obj.kind() == ValueKind::kList || name != "copy")) {
      return Bound(obj, name);
    }
    if (obj.kind() == ValueKind::kList && In(kListUnsafe, name)) {
      return Unsafe(obj, name);
    }
  }
  if (obj.is_namespace()) {
    if (const Value* v = obj.map().Find(name)) return *v;
  }
  return std::nullopt;
}

std::optional<int64_t> IndexOf(const Value& v) {
  if (v.is_int()) return v.int_value();
  if (v.is_bool()) return static_cast<int64_t>(v.bool_value());
  return std::nullopt;
}

Value Strings(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::String(p));
  return Value::List(std::move(items));
}

StatusOr<std::optional<std::string>> OptionalString(const ArgReader& r,
                                                    size_t i) {
  const Value v = r.Get(i, Value::None());
  if (v.is_none()) return std::optional<std::string>();
  if (!v.is_string()) {
    return JinjaError(ErrorKind::kType,
                      "expected str or None, not " + TypeName(v));
  }
  return std::optional<std::string>(v.str());
}

StatusOr<bool> AffixMatch(const Value& self, const Value& affix, bool start) {
  std::vector<Value> options;
  if (affix.kind() == ValueKind::kTuple) {
    options = affix.items();
  } else {
    options.push_back(affix);
  }
  for (const Value& o : options) {
    if (!o.is_string()) {
      return JinjaError(ErrorKind::kType,
                        std::string(start ? "startswith" : "endswith") +
                            " first arg must be str or a tuple of str, not " +
                            TypeName(o));
    }
    if (start ? self.str().starts_with(o.str())
              : self.str().ends_with(o.str())) {
      return true;
    }
  }
  return false;
}

StatusOr<Value> StrJoin(Interpreter& ip, const std::string& sep,
                        const Value& iterable) {
  KV_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return JinjaError(ErrorKind::kType, "sequence item " + std::to_string(i) +
                                              ": expected str instance, " +
                                              TypeName(items[i]) + " found");
    }
    if (i > 0) out += sep;
    out += items[i].str();
    KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
  }
  return Value::String(std::move(out));
}

// The item limit's error for a split into more than `left` pieces.
Status TooManyPieces(const std::string& name, uint64_t left) {
  return JinjaError(ErrorKind::kLimit,
                    name + " would build more than the " +
                        std::to_string(left) +
                        " container items left under the item limit");
}

// Returns an upper bound of the lines splitlines makes of `s`: one more
// than its line breaks (\r\n counted twice).
uint64_t MaxLines(std::string_view s) {
  uint64_t n = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const std::string_view rest = s.substr(i);
    n += c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c' ||
         (c >= '\x1c' && c <= '\x1e') || rest.starts_with("\xc2\x85") ||
         rest.starts_with("\xe2\x80\xa8") || rest.starts_with("\xe2\x80\xa9");
  }
  return n;
}

// str.split and its kin, bounded by the render's item limit: pieces are
// counted (or maxsplit capped) before any is built.
StatusOr<Value> StrSplitLike(Interpreter& ip, const std::string& name,
                             const std::string& s, const CallArgs& args) {
  const uint64_t left = ip.ItemsLeft();
  if (name == "splitlines") {
    ArgReader r(name, args, {"keepends"});
    KV_RETURN_IF_ERROR(r.status());
    if (MaxLines(s) > left) return TooManyPieces(name, left);
    const std::vector<std::string> lines = PySplitLines(s, r.GetBool(0, false));
    KV_RETURN_IF_ERROR(ip.ChargeItems(lines.size()));
    return Strings(lines);
  }
  if (name == "partition" || name == "rpartition") {
    ArgReader r(name, args, {"sep"});
    KV_RETURN_IF_ERROR(r.status());
    KV_ASSIGN_OR_RETURN(std::string sep, r.GetString(0, ""));
    if (sep.empty()) return JinjaError(ErrorKind::kValue, "empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition"
                 ? Value::Tuple(
                       {Value::String(s), Value::String(""), Value::String("")})
                 : Value::Tuple({Value::String(""), Value::String(""),
                                 Value::String(s)});
    }
    return Value::Tuple({Value::String(s.substr(0, at)), Value::String(sep),
                         Value::String(s.substr(at + sep.size()))});
  }
  ArgReader r(name, args, {"sep", "maxsplit"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(std::optional<std::string> sep, OptionalString(r, 0));
  KV_ASSIGN_OR_RETURN(int64_t maxsplit, r.GetInt(1, -1));
  // At most `left` splits: more pieces than that means over the limit.
  const bool capped = maxsplit < 0 || static_cast<uint64_t>(maxsplit) > left;
  const int64_t bounded = capped ? static_cast<int64_t>(left) : maxsplit;
  KV_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                      PySplit(s, sep, bounded, name == "rsplit"));
  if (capped && parts.size() > left) return TooManyPieces(name, left);
  KV_RETURN_IF_ERROR(ip.ChargeItems(parts.size()));
  return Strings(parts);
}

StatusOr<Value> StrArgMethod(Interpreter& ip, const Value& self,
                             const std::string& name, CallArgs& args);

StatusOr<Value> StrMethod(Interpreter& ip, const Value& self,
                          const std::string& name, CallArgs& args) {
  const std::string& s = self.str();
  if (name == "format") {
    KV_ASSIGN_OR_RETURN(std::string out, BraceFormat(s, args));
    KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "split" || name == "rsplit" || name == "splitlines" ||
      name == "partition" || name == "rpartition") {
    return StrSplitLike(ip, name, s, args);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgReader r(name, args, {"chars"});
    KV_RETURN_IF_ERROR(r.status());
    KV_ASSIGN_OR_RETURN(std::optional<std::string> chars, OptionalString(r, 0));
    return Value::String(PyStrip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    ArgReader r(name, args, {"prefix"});
    KV_RETURN_IF_ERROR(r.status());
    KV_ASSIGN_OR_RETURN(bool m, AffixMatch(self, r.Get(0), name[0] == 's'));
    return Value::Bool(m);
  }
  if (name == "join") {
    ArgReader r(name, args, {"iterable"});
    KV_RETURN_IF_ERROR(r.status());
    return StrJoin(ip, s, r.Get(0));
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower" || name == "casefold") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "swapcase") return Value::String(PySwapCase(s));
  if (name.starts_with("is")) return Value::Bool(PyIsClass(s, name.substr(2)));
  return StrArgMethod(ip, self, name, args);
}

// The str methods taking up to three plain arguments: replace, find/index
// and friends, count, removeprefix/suffix, and the padding methods.
StatusOr<Value> StrArgMethod(Interpreter& ip, const Value& self,
                             const std::string& name, CallArgs& args) {
  const std::string& s = self.str();
  ArgReader r(name, args, {"a", "b", "c"});
  KV_RETURN_IF_ERROR(r.status());
  if (name == "replace") {
    KV_ASSIGN_OR_RETURN(std::string old, r.GetString(0, ""));
    KV_ASSIGN_OR_RETURN(std::string repl, r.GetString(1, ""));
    KV_ASSIGN_OR_RETURN(int64_t count, r.GetInt(2, -1));
    std::string out = PyReplace(s, old, repl, count);
    KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" ||
      name == "rindex" || name == "count") {
    KV_ASSIGN_OR_RETURN(std::string sub, r.GetString(0, ""));
    if (name == "count") return Value::Int(PyCount(s, sub));
    const int64_t at = PyFind(s, sub, name[0] == 'r');
    if (at < 0 && name.ends_with("index")) {
      return JinjaError(ErrorKind::kValue, "substring not found");
    }
    return Value::Int(at);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    KV_ASSIGN_OR_RETURN(std::string affix, r.GetString(0, ""));
    if (name == "removeprefix" && s.starts_with(affix)) {
      return Value::String(s.substr(affix.size()));
    }
    if (name == "removesuffix" && s.ends_with(affix) && !affix.empty()) {
      return Value::String(s.substr(0, s.size() - affix.size()));
    }
    return self;
  }
  // center, ljust, rjust, zfill
  KV_ASSIGN_OR_RETURN(int64_t width, r.GetInt(0, 0));
  KV_RETURN_IF_ERROR(ip.CheckSize(std::max<int64_t>(width, 0) * 4));
  KV_ASSIGN_OR_RETURN(std::string fill, r.GetString(1, " "));
  std::u32string fill_cp = DecodeUtf8(fill);
  if (fill_cp.size() != 1) {
    return JinjaError(ErrorKind::kType,
                      "The fill character must be exactly one character long");
  }
  const char align = name == "center" ? '^' : name == "ljust" ? '<' : '>';
  if (name == "zfill") return Value::String(PyPad(s, width, '0', '>'));
  return Value::String(PyPad(s, width, fill_cp[0], align));
}

StatusOr<Value> DictMethod(const Value& self, const std::string& name,
                           CallArgs& args) {
  ArgReader r(name, args, {"key", "default"});
  KV_RETURN_IF_ERROR(r.status());
  if (name == "get") {
    const Value key = r.Get(0);
    const Value* found = self.map().FindKey(key);
    return found ? *found : r.Get(1, Value::None());
  }
  if (name == "copy") return Value::Dict(self.map());
  std::vector<Value> out;
  for (size_t i = 0; i < self.map().size(); ++i) {
    const Value& v = self.map().entries()[i].second;
    if (name == "items") {
      out.push_back(Value::Tuple({self.map().KeyAt(i), v}));
    } else {
      out.push_back(name == "keys" ? self.map().KeyAt(i) : v);
    }
  }
  return Value::List(std::move(out));
}

StatusOr<Value> ListMethod(const Value& self, const std::string& name,
                           CallArgs& args) {
  ArgReader r(name, args, {"value"});
  KV_RETURN_IF_ERROR(r.status());
  if (name == "copy") return Value::List(self.items());
  const Value needle = r.Get(0);
  int64_t count = 0;
  for (size_t i = 0; i < self.items().size(); ++i) {
    if (!Equals(self.items()[i], needle)) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") {
    return JinjaError(ErrorKind::kValue, Repr(needle) + " is not in list");
  }
  return Value::Int(count);
}

StatusOr<Value> CallMethod(Interpreter& ip, const Value& self,
                           const std::string& name, CallArgs& args) {
  KV_RETURN_IF_ERROR(ip.Charge(1));
  if (self.is_string()) return StrMethod(ip, self, name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  return ListMethod(self, name, args);
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  if (std::optional<Value> attr = PythonAttr(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.map().Find(name)) return *v;
  }
  return NoAttribute(obj, name);
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (const Value* v = obj.map().FindKey(key)) return *v;
  }
  if (std::optional<int64_t> index = IndexOf(key)) {
    if (IsList(obj) || obj.is_string()) {
      const bool str = obj.is_string();
      std::u32string cps;
      if (str) cps = DecodeUtf8(obj.str());
      const int64_t n =
          static_cast<int64_t>(str ? cps.size() : obj.items().size());
      const int64_t i = *index < 0 ? *index + n : *index;
      if (i >= 0 && i < n) {
        if (!str) return obj.items()[i];
        std::string out;
        AppendUtf8(cps[i], &out);
        return Value::String(std::move(out));
      }
    }
    return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no element " +
                            std::to_string(*index));
  }
  if (key.is_string()) {
    if (std::optional<Value> attr = PythonAttr(obj, key.str())) return *attr;
    return NoAttribute(obj, key.str());
  }
  return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no element " +
                          Repr(key));
}

StatusOr<Value> SliceValue(Interpreter& ip, const Value& obj,
                           const Value* start, const Value* stop,
                           const Value* step) {
  std::array<std::optional<int64_t>, 3> b;
  const Value* parts[3] = {start, stop, step};
  for (int i = 0; i < 3; ++i) {
    if (!parts[i] || parts[i]->is_none()) continue;
    b[i] = IndexOf(*parts[i]);
    if (!b[i]) {
      return JinjaError(ErrorKind::kType,
                        "slice indices must be integers or None or have an "
                        "__index__ method");
    }
  }
  const int64_t st = b[2].value_or(1);
  if (st == 0)
    return JinjaError(ErrorKind::kValue, "slice step cannot be zero");
  if (!IsList(obj) && !obj.is_string()) {
    return Value::Undefined("'" + ObjectTypeRepr(obj) +
                            "' has no element "
                            "slice");
  }
  std::u32string cps;
  if (obj.is_string()) cps = DecodeUtf8(obj.str());
  const int64_t n =
      static_cast<int64_t>(obj.is_string() ? cps.size() : obj.items().size());
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t from = clamp(b[0], st > 0 ? 0 : n - 1);
  const int64_t to = clamp(b[1], st > 0 ? n : -1);
  KV_RETURN_IF_ERROR(ip.ChargeItems(static_cast<uint64_t>(n)));
  std::u32string out_cps;
  std::vector<Value> out_items;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) {
    if (obj.is_string()) {
      out_cps.push_back(cps[i]);
    } else {
      out_items.push_back(obj.items()[i]);
    }
  }
  if (obj.is_string()) return Value::String(EncodeUtf8(out_cps));
  return obj.kind() == ValueKind::kTuple ? Value::Tuple(std::move(out_items))
                                         : Value::List(std::move(out_items));
}

StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::vector<Value>();
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kGenerator:
      return v.items();
    case ValueKind::kDict: {
      std::vector<Value> keys;
      for (size_t i = 0; i < v.map().size(); ++i) {
        keys.push_back(v.map().KeyAt(i));
      }
      return keys;
    }
    case ValueKind::kString: {
      std::vector<Value> chars;
      for (char32_t c : DecodeUtf8(v.str())) {
        std::string s;
        AppendUtf8(c, &s);
        chars.push_back(Value::String(std::move(s)));
      }
      return chars;
    }
    default:
      return JinjaError(ErrorKind::kType,
                        "'" + TypeName(v) + "' object is not iterable");
  }
}

}  // namespace kvault::jinja
