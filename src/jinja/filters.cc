// Filter dispatch and the text/number filters; sequence filters are in
// filters_seq.cc.
#include "jinja/filters.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "jinja/args.h"
#include "jinja/filter_table.h"
#include "jinja/interpreter.h"
#include "jinja/methods.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"
#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

using Fn = StatusOr<Value>;

Fn Checked(Interpreter& ip, std::string s) {
  KV_RETURN_IF_ERROR(ip.CheckSize(s.size()));
  KV_RETURN_IF_ERROR(ip.ChargeBytes(s.size()));
  return Value::String(std::move(s));
}

Fn Length(Interpreter&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return Value::Int(0);
    case ValueKind::kString:
      return Value::Int(static_cast<int64_t>(Utf8Length(v.str())));
    case ValueKind::kList:
    case ValueKind::kTuple:
      return Value::Int(static_cast<int64_t>(v.items().size()));
    case ValueKind::kDict:
      return Value::Int(static_cast<int64_t>(v.map().size()));
    default:
      return JinjaError(ErrorKind::kType,
                        "object of type '" + TypeName(v) + "' has no len()");
  }
}

Fn Default(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("default", args, {"default_value", "boolean"});
  KV_RETURN_IF_ERROR(r.status());
  const bool boolean = r.GetBool(1, false);
  if (v.is_undefined() || (boolean && !v.Truthy())) {
    return r.Get(0, Value::String(""));
  }
  return v;
}

Fn Trim(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("trim", args, {"chars"});
  KV_RETURN_IF_ERROR(r.status());
  std::optional<std::string> chars;
  if (r.Has(0) && !r.Get(0).is_none()) {
    KV_ASSIGN_OR_RETURN(std::string c, r.GetString(0, ""));
    chars = c;
  }
  return Value::String(PyStrip(ToStr(v), chars, true, true));
}

Fn String(Interpreter& ip, const Value& v, CallArgs&) {
  if (v.is_string()) return v;
  return Checked(ip, ToStr(v));
}

Fn Upper(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(PyUpper(ToStr(v)));
}
Fn Lower(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(PyLower(ToStr(v)));
}
Fn Capitalize(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(PyCapitalize(ToStr(v)));
}
// jinja2's title filter is not str.title(): it upper-cases the first
// character of each run between whitespace, '-', '(', '{', '[' and '<' and
// lower-cases the rest ("o'neil" -> "O'neil", str.title gives "O'Neil").
Fn Title(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  bool start = true;
  for (char32_t c : DecodeUtf8(ToStr(v))) {
    const bool sep = IsPySpace(c) || c == '-' || c == '(' || c == '{' ||
                     c == '[' || c == '<';
    std::string one;
    AppendUtf8(c, &one);
    out += sep ? one : (start ? PyUpper(one) : PyLower(one));
    start = sep;
  }
  return Value::String(std::move(out));
}

Fn Replace(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("replace", args, {"old", "new", "count"});
  KV_RETURN_IF_ERROR(r.status());
  const std::string old = ToStr(r.Get(0));
  const std::string repl = ToStr(r.Get(1));
  int64_t count = -1;
  if (r.Has(2) && !r.Get(2).is_none()) {
    KV_ASSIGN_OR_RETURN(count, r.GetInt(2, -1));
  }
  return Checked(ip, PyReplace(ToStr(v), old, repl, count));
}

Fn Escape(Interpreter& ip, const Value& v, CallArgs&) {
  std::string out;
  for (char c : ToStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Checked(ip, std::move(out));
}

Fn Safe(Interpreter& ip, const Value& v, CallArgs&) {
  if (v.is_string()) return v;
  return Checked(ip, ToStr(v));
}

Fn ToJsonFilter(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("tojson", args,
              {"ensure_ascii", "indent", "separators", "sort_keys"});
  KV_RETURN_IF_ERROR(r.status());
  JsonOptions o;
  o.ensure_ascii = r.GetBool(0, false);
  o.sort_keys = r.GetBool(3, false);
  const Value indent = r.Get(1, Value::None());
  if (indent.is_int() || indent.is_bool()) {
    o.indent = std::string(
        std::clamp<int64_t>(indent.is_int() ? indent.int_value() : 1, 0, 64),
        ' ');
  } else if (indent.is_string()) {
    o.indent = indent.str();
  }
  if (o.indent) o.item_separator = ",";
  const Value seps = r.Get(2, Value::None());
  if (seps.is_list_like() && seps.items().size() == 2 &&
      seps.items()[0].is_string() && seps.items()[1].is_string()) {
    o.item_separator = seps.items()[0].str();
    o.key_separator = seps.items()[1].str();
  } else if (!seps.is_none()) {
    return JinjaError(ErrorKind::kType, "separators must be a pair of str");
  }
  KV_ASSIGN_OR_RETURN(std::string s,
                      DumpJson(v, o, ip.options().max_output_bytes));
  return Value::String(std::move(s));
}

Fn Int(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("int", args, {"default", "base"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t base, r.GetInt(1, 10));
  if (v.is_undefined()) return UndefinedFailure(v);  // int(Undefined) raises
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::Int(v.bool_value());
  if (v.is_float() && std::isfinite(v.AsDouble()) &&
      std::fabs(v.AsDouble()) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(v.AsDouble()));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), std::nullopt, true, true);
    std::erase(s, '_');
    if (!s.empty() && base >= 2 && base <= 36) {
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(s.c_str(), &end, static_cast<int>(base));
      if (errno == 0 && end && *end == '\0') return Value::Int(n);
      const double d = std::strtod(s.c_str(), &end);
      if (end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d));
      }
    }
  }
  return r.Get(0, Value::Int(0));
}

Fn Float(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("float", args, {"default"});
  KV_RETURN_IF_ERROR(r.status());
  if (v.is_undefined()) return UndefinedFailure(v);  // float(Undefined) raises
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value::Float(d);
  }
  return r.Get(0, Value::Float(0.0));
}

Fn Abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_int() && v.int_value() != INT64_MIN) {
    return Value::Int(std::llabs(v.int_value()));
  }
  if (v.is_bool()) return Value::Int(v.bool_value());
  if (v.is_float()) return Value::Float(std::fabs(v.AsDouble()));
  return JinjaError(ErrorKind::kType,
                    "bad operand type for abs(): '" + TypeName(v) + "'");
}

Fn Round(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("round", args, {"precision", "method"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t precision, r.GetInt(0, 0));
  KV_ASSIGN_OR_RETURN(std::string method, r.GetString(1, "common"));
  if (!v.is_number()) {
    return JinjaError(ErrorKind::kType,
                      "type " + TypeName(v) + " doesn't define __round__");
  }
  if (method == "common" && !v.is_float())
    return Value::Int(v.is_bool() ? v.bool_value() : v.int_value());
  const double scale = std::pow(
      10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
  const double x = v.AsDouble() * scale;
  double y;
  if (method == "ceil") {
    y = std::ceil(x);
  } else if (method == "floor") {
    y = std::floor(x);
  } else if (method == "common") {
    y = std::nearbyint(x);
  } else {
    return JinjaError(ErrorKind::kTemplate,
                      "method must be common, ceil or floor");
  }
  return Value::Float(y / scale);
}

Fn Indent(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("indent", args, {"width", "first", "blank"});
  KV_RETURN_IF_ERROR(r.status());
  std::string pad;
  const Value width = r.Get(0, Value::Int(4));
  if (width.is_string()) {
    pad = width.str();
  } else {
    KV_ASSIGN_OR_RETURN(int64_t w, r.GetInt(0, 4));
    pad = std::string(std::clamp<int64_t>(w, 0, 1024), ' ');
  }
  // jinja2 appends "\n" to the value itself: only strings (Markup) work.
  if (v.is_undefined()) return UndefinedFailure(v);
  if (!v.is_string()) {
    return JinjaError(ErrorKind::kType,
                      "unsupported operand type(s) for +=: "
                      "'" +
                          TypeName(v) + "' and 'str'");
  }
  const bool first = r.GetBool(1, false);
  const bool blank = r.GetBool(2, false);
  // jinja2 3.1 appends "\n" before splitlines(), which drops one trailing
  // line break's empty line.
  std::vector<std::string> lines = PySplitLines(ToStr(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
    KV_RETURN_IF_ERROR(ip.CheckSize(out.size()));
  }
  if (first) out = pad + out;
  return Checked(ip, std::move(out));
}

Fn Center(Interpreter& ip, const Value& v, CallArgs& args) {
  ArgReader r("center", args, {"width"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t width, r.GetInt(0, 80));
  KV_RETURN_IF_ERROR(ip.CheckSize(std::max<int64_t>(width, 0)));
  return Value::String(PyPad(ToStr(v), width, ' ', '^'));
}

Fn Format(Interpreter& ip, const Value& v, CallArgs& args) {
  Value fmt_args;
  if (!args.keyword.empty()) {
    ValueMap map;
    for (const auto& [k, val] : args.keyword) map.Set(k, val);
    fmt_args = Value::Dict(std::move(map));
  } else {
    fmt_args = Value::Tuple(args.positional);
  }
  KV_ASSIGN_OR_RETURN(std::string s, PercentFormat(ToStr(v), fmt_args));
  return Checked(ip, std::move(s));
}

Fn Truncate(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("truncate", args, {"length", "killwords", "end", "leeway"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(int64_t length, r.GetInt(0, 255));
  KV_ASSIGN_OR_RETURN(std::string end, r.GetString(2, "..."));
  KV_ASSIGN_OR_RETURN(int64_t leeway, r.GetInt(3, 5));
  if (v.is_list_like() || v.is_dict()) {
    // Short sequences come back unchanged; longer ones cannot be cut.
    const size_t n = v.is_dict() ? v.map().size() : v.items().size();
    if (static_cast<int64_t>(n) <= length + leeway) return v;
  }
  if (!v.is_string() && !v.is_undefined()) {
    return JinjaError(ErrorKind::kType,
                      "object of type '" + TypeName(v) + "' has no len()");
  }
  std::u32string s = DecodeUtf8(ToStr(v));
  const int64_t end_len = static_cast<int64_t>(Utf8Length(end));
  if (length < end_len || leeway < 0) {
    return JinjaError(ErrorKind::kValue, "AssertionError in truncate");
  }
  if (static_cast<int64_t>(s.size()) <= length + leeway) {
    return Value::String(EncodeUtf8(s));
  }
  std::string head = EncodeUtf8(s.substr(0, length - end_len));
  if (!r.GetBool(1, false)) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return Value::String(head + end);
}

Fn WordCount(Interpreter&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(ToStr(v))) {
    const bool word = c == '_' || (c >= '0' && c <= '9') ||
                      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c > 0x7F && !IsPySpace(c));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::Int(n);
}

Fn UrlEncode(Interpreter& ip, const Value& v, CallArgs&) {
  // A lone string keeps '/'; query pairs write a space as '+'.
  auto quote = [](const std::string& s, bool keep_slash) {
    std::string out;
    for (unsigned char c : s) {
      if (c == ' ' && !keep_slash) {
        out.push_back('+');
      } else if (std::isalnum(c) || c == '_' || c == '.' || c == '-' ||
                 c == '~' || (keep_slash && c == '/')) {
        out.push_back(static_cast<char>(c));
      } else {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%%%02X", c);
        out += buf;
      }
    }
    return out;
  };
  if (!v.is_dict()) return Checked(ip, quote(ToStr(v), true));
  std::string out;
  for (const auto& [k, val] : v.map().entries()) {
    if (!out.empty()) out += "&";
    out += quote(k, false) + "=" + quote(ToStr(val), false);
  }
  return Checked(ip, std::move(out));
}

Fn Attr(Interpreter&, const Value& v, CallArgs& args) {
  ArgReader r("attr", args, {"name"});
  KV_RETURN_IF_ERROR(r.status());
  KV_ASSIGN_OR_RETURN(std::string name, r.GetString(0, ""));
  if (v.is_undefined()) return UndefinedFailure(v);
  return GetAttr(v, name);
}

const FilterTable& Table() {
  static const FilterTable* const kTable = [] {
    auto* t = new FilterTable{
        {"length", Length},
        {"count", Length},
        {"default", Default},
        {"d", Default},
        {"trim", Trim},
        {"string", String},
        {"upper", Upper},
        {"lower", Lower},
        {"capitalize", Capitalize},
        {"title", Title},
        {"replace", Replace},
        {"e", Escape},
        {"escape", Escape},
        {"forceescape", Escape},
        {"safe", Safe},
        {"tojson", ToJsonFilter},
        {"int", Int},
        {"float", Float},
        {"abs", Abs},
        {"round", Round},
        {"indent", Indent},
        {"center", Center},
        {"format", Format},
        {"truncate", Truncate},
        {"wordcount", WordCount},
        {"urlencode", UrlEncode},
        {"attr", Attr},
    };
    AddSequenceFilters(t);
    return t;
  }();
  return *kTable;
}

}  // namespace

StatusOr<Value> ApplyFilter(Interpreter& ip, std::string_view name,
                            const Value& operand, CallArgs& args) {
  KV_RETURN_IF_ERROR(ip.Charge(1));
  auto it = Table().find(name);
  if (it == Table().end()) {
    return JinjaError(ErrorKind::kTemplate,
                      "No filter named '" + std::string(name) + "'.");
  }
  return it->second(ip, operand, args);
}

bool HasFilter(std::string_view name) { return Table().count(name) > 0; }

StatusOr<Value> GetPath(const Value& item, std::string_view attribute) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = attribute.find('.', start);
    std::string part(attribute.substr(start, dot == std::string_view::npos
                                                 ? std::string_view::npos
                                                 : dot - start));
    if (cur.is_undefined()) return UndefinedFailure(cur);
    const bool numeric =
        !part.empty() &&
        part.find_first_not_of("0123456789") == std::string::npos &&
        part.size() < 18;
    cur = GetItem(cur,
                  numeric ? Value::Int(std::stoll(part)) : Value::String(part));
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace kvault::jinja
