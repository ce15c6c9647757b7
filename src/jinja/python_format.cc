#include "jinja/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

// Deeper nesting than this only happens through a namespace holding itself.
constexpr int kMaxNesting = 200;

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
      (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) ||
      c == 0x3000 || c == 0xFEFF) {
    return false;
  }
  if (c >= 0xD800 && c <= 0xDFFF) return false;
  if (c >= 0xE000 && c <= 0xF8FF) return false;
  return true;
}

void AppendHex(char prefix, uint32_t value, int digits, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\%c%0*x", prefix, digits, value);
  out->append(buf);
}

class Writer {
 public:
  explicit Writer(size_t limit, std::string* out) : limit_(limit), out_(out) {}
  bool ok() const { return ok_ && out_->size() <= limit_; }

  void Repr(const Value& v, int depth) {
    if (!ok()) return;
    if (depth > kMaxNesting) {
      out_->append("...");
      return;
    }
    switch (v.kind()) {
      case ValueKind::kString:
        out_->append(StringRepr(v.str()));
        return;
      case ValueKind::kUndefined:
        out_->append("Undefined");
        return;
      case ValueKind::kList:
        Items(v, "[", "]", depth);
        return;
      case ValueKind::kTuple:
        Items(v, "(", v.items().size() == 1 ? ",)" : ")", depth);
        return;
      case ValueKind::kDict:
        Map(v, depth);
        return;
      case ValueKind::kNamespace:
        out_->append("<Namespace ");
        Map(v, depth);
        out_->append(">");
        return;
      case ValueKind::kGenerator:
        out_->append("<generator object at 0x7f0000000000>");
        return;
      case ValueKind::kFunction:
        if (v.function().is_macro) {
          out_->append("<Macro '" + v.function().name + "'>");
        } else {
          out_->append("<built-in function " + v.function().name + ">");
        }
        return;
      default:
        Str(v, depth);
        return;
    }
  }

  void Str(const Value& v, int depth) {
    switch (v.kind()) {
      case ValueKind::kUndefined:
        return;
      case ValueKind::kNone:
        out_->append("None");
        return;
      case ValueKind::kBool:
        out_->append(v.bool_value() ? "True" : "False");
        return;
      case ValueKind::kInt:
        out_->append(std::to_string(v.int_value()));
        return;
      case ValueKind::kFloat:
        out_->append(FloatRepr(v.AsDouble()));
        return;
      case ValueKind::kString:
        out_->append(v.str());
        return;
      default:
        Repr(v, depth);
    }
  }

 private:
  // Python's reprs print a container already being printed as [...] or
  // {...} (only a namespace can contain itself here).
  bool Recursing(const void* container, const char* marker) {
    for (const void* p : active_) {
      if (p != container) continue;
      out_->append(marker);
      return true;
    }
    return false;
  }

  void Items(const Value& v, const char* open, const char* close, int depth) {
    if (Recursing(&v.items(), "[...]")) return;
    active_.push_back(&v.items());
    ItemsBody(v, open, close, depth);
    active_.pop_back();
  }

  void ItemsBody(const Value& v, const char* open, const char* close,
                 int depth) {
    out_->append(open);
    bool first = true;
    for (const Value& item : v.items()) {
      if (!ok()) return;
      if (!first) out_->append(", ");
      first = false;
      Repr(item, depth + 1);
    }
    out_->append(close);
  }

  void Map(const Value& v, int depth) {
    if (Recursing(&v.map(), "{...}")) return;
    active_.push_back(&v.map());
    MapBody(v, depth);
    active_.pop_back();
  }

  void MapBody(const Value& v, int depth) {
    out_->append("{");
    bool first = true;
    for (size_t i = 0; i < v.map().size(); ++i) {
      if (!ok()) return;
      if (!first) out_->append(", ");
      first = false;
      Repr(v.map().KeyAt(i), depth + 1);
      out_->append(": ");
      Repr(v.map().entries()[i].second, depth + 1);
    }
    out_->append("}");
  }

  size_t limit_;
  std::string* out_;
  bool ok_ = true;
  std::vector<const void*> active_;  // containers being printed
};

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (char32_t c : DecodeUtf8(s)) {
    switch (c) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E && c != 0x7F)) {
      if (c >= 0x10000) {
        const uint32_t v = c - 0x10000;
        AppendHex('u', 0xD800 + (v >> 10), 4, out);
        AppendHex('u', 0xDC00 + (v & 0x3FF), 4, out);
      } else {
        AppendHex('u', c, 4, out);
      }
      continue;
    }
    AppendUtf8(c, out);
  }
  out->push_back('"');
}

class JsonWriter {
 public:
  JsonWriter(const JsonOptions& o, size_t limit, std::string* out)
      : o_(o), limit_(limit), out_(out) {}

  Status Write(const Value& v, int depth) {
    if (out_->size() > limit_) {
      return JinjaError(ErrorKind::kLimit, "tojson output exceeds the limit");
    }
    if (depth > kMaxNesting) {
      return JinjaError(ErrorKind::kValue, "Circular reference detected");
    }
    switch (v.kind()) {
      case ValueKind::kNone:
        out_->append("null");
        return Status::Ok();
      case ValueKind::kBool:
        out_->append(v.bool_value() ? "true" : "false");
        return Status::Ok();
      case ValueKind::kInt:
        out_->append(std::to_string(v.int_value()));
        return Status::Ok();
      case ValueKind::kFloat:
        Float(v.AsDouble());
        return Status::Ok();
      case ValueKind::kString:
        AppendJsonString(v.str(), o_.ensure_ascii, out_);
        return Status::Ok();
      case ValueKind::kList:
      case ValueKind::kTuple:
        return List(v, depth);
      case ValueKind::kDict:
        return Dict(v, depth);
      default:
        return JinjaError(ErrorKind::kType, "Object of type " + TypeName(v) +
                                                " is not JSON serializable");
    }
  }

 private:
  void Float(double d) {
    if (std::isnan(d)) {
      out_->append("NaN");
    } else if (std::isinf(d)) {
      out_->append(d > 0 ? "Infinity" : "-Infinity");
    } else {
      out_->append(FloatRepr(d));
    }
  }

  void Newline(int depth) {
    if (!o_.indent) return;
    out_->push_back('\n');
    for (int i = 0; i < depth; ++i) out_->append(*o_.indent);
  }

  Status List(const Value& v, int depth) {
    if (v.items().empty()) {
      out_->append("[]");
      return Status::Ok();
    }
    out_->push_back('[');
    bool first = true;
    for (const Value& item : v.items()) {
      if (!first) out_->append(o_.item_separator);
      first = false;
      Newline(depth + 1);
      KV_RETURN_IF_ERROR(Write(item, depth + 1));
    }
    Newline(depth);
    out_->push_back(']');
    return Status::Ok();
  }

  Status Dict(const Value& v, int depth) {
    if (v.map().size() == 0) {
      out_->append("{}");
      return Status::Ok();
    }
    // json.dumps writes non-str keys as their JSON text ("1024", "true").
    std::vector<std::pair<std::string, const Value*>> entries;
    for (size_t i = 0; i < v.map().size(); ++i) {
      const Value key = v.map().KeyAt(i);
      std::string text;
      if (key.is_string()) {
        text = key.str();
      } else if (key.is_none()) {
        text = "null";
      } else if (key.is_bool()) {
        text = key.bool_value() ? "true" : "false";
      } else if (key.is_number()) {
        text = ToStr(key);
      } else {
        return JinjaError(ErrorKind::kType,
                          "keys must be str, int, float, "
                          "bool or None, not tuple");
      }
      entries.emplace_back(std::move(text), &v.map().entries()[i].second);
    }
    if (o_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto& a, auto& b) { return a.first < b.first; });
    }
    out_->push_back('{');
    bool first = true;
    for (const auto& [key, value] : entries) {
      if (!first) out_->append(o_.item_separator);
      first = false;
      Newline(depth + 1);
      AppendJsonString(key, o_.ensure_ascii, out_);
      out_->append(o_.key_separator);
      KV_RETURN_IF_ERROR(Write(*value, depth + 1));
    }
    Newline(depth);
    out_->push_back('}');
    return Status::Ok();
  }

  const JsonOptions& o_;
  size_t limit_;
  std::string* out_;
};

}  // namespace

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res =
      std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "[-]D[.DDD]e[+-]XX": split into sign, digits and exponent.
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int decpt = exp10 + 1;  // digits are 0.DDD * 10^decpt
  std::string out = sign;
  if (decpt > 16 || decpt < -3) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+',
                  std::abs(exp10));
    return out + ebuf;
  }
  if (decpt <= 0) {
    return out + "0." + std::string(-decpt, '0') + digits;
  }
  if (static_cast<size_t>(decpt) >= digits.size()) {
    return out + digits + std::string(decpt - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

std::string StringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (IsPrintable(c)) {
      AppendUtf8(c, &out);
    } else if (c < 0x100) {
      AppendHex('x', c, 2, &out);
    } else if (c < 0x10000) {
      AppendHex('u', c, 4, &out);
    } else {
      AppendHex('U', c, 8, &out);
    }
  }
  out.push_back(quote);
  return out;
}

bool AppendRepr(const Value& v, size_t limit, std::string* out) {
  Writer w(limit, out);
  w.Repr(v, 0);
  return w.ok();
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(v, kDefaultTextLimit, &out);
  return out;
}

bool AppendStr(const Value& v, size_t limit, std::string* out) {
  Writer w(limit, out);
  w.Str(v, 0);
  return w.ok();
}

std::string ToStr(const Value& v) {
  std::string out;
  AppendStr(v, kDefaultTextLimit, &out);
  return out;
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      return "list";
    case ValueKind::kTuple:
      return "tuple";
    case ValueKind::kGenerator:
      return "generator";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "Namespace";
    case ValueKind::kFunction:
      return v.function().is_macro ? "Macro" : "builtin_function_or_method";
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  return TypeName(v) + " object";
}

StatusOr<std::string> DumpJson(const Value& v, const JsonOptions& options,
                               size_t limit) {
  std::string out;
  JsonWriter w(options, limit, &out);
  KV_RETURN_IF_ERROR(w.Write(v, 0));
  if (out.size() > limit) {
    return JinjaError(ErrorKind::kLimit, "tojson output exceeds the limit");
  }
  return out;
}

}  // namespace kvault::jinja
