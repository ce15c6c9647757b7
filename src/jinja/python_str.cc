#include "jinja/python_str.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/python_format.h"
#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

char32_t ToUpperCp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x100 && c <= 0x17F && (c & 1) && c != 0x131 && c != 0x149 &&
      c != 0x17F) {
    return (c >= 0x139 && c <= 0x148) || c >= 0x179 ? c : c - 1;
  }
  return c;
}

char32_t ToLowerCp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x100 && c <= 0x137 && !(c & 1) && c != 0x130) return c + 1;
  return c;
}

bool IsUpperCp(char32_t c) { return ToLowerCp(c) != c; }
bool IsLowerCp(char32_t c) { return ToUpperCp(c) != c || c == 0xDF; }
bool IsAlphaCp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  // Outside ASCII, letters are the common case; punctuation blocks are not.
  return !IsPySpace(c) && !(c >= 0x2000 && c <= 0x2BFF) &&
         !(c >= 0x3000 && c <= 0x303F) && !(c >= 0xFF00 && c <= 0xFF0F) &&
         c != 0xD7 && c != 0xF7 && !(c >= 0x80 && c <= 0xBF);
}
bool IsDigitCp(char32_t c) { return c >= '0' && c <= '9'; }

std::string MapCase(std::string_view s, char32_t (*f)(char32_t)) {
  if (IsAscii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(f(static_cast<char32_t>(c)));
    return out;
  }
  std::u32string cps = DecodeUtf8(s);
  std::string out;
  out.reserve(s.size());
  for (char32_t c : cps) {
    if (c == 0xDF && f == ToUpperCp) {
      out += "SS";
      continue;
    }
    AppendUtf8(f(c), &out);
  }
  return out;
}

}  // namespace

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right) {
  std::u32string cps = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsPySpace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return EncodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

namespace {

// str.split()/rsplit() without a separator: runs of whitespace separate,
// and the unsplit rest keeps its spaces.
std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit,
                                         bool from_right) {
  std::u32string cps = DecodeUtf8(s);
  if (from_right) std::reverse(cps.begin(), cps.end());
  std::vector<std::u32string> parts;
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsPySpace(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(cps.substr(i));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPySpace(cps[j])) ++j;
    parts.push_back(cps.substr(i, j - i));
    i = j;
  }
  std::vector<std::string> out;
  for (auto& p : parts) {
    if (from_right) std::reverse(p.begin(), p.end());
    out.push_back(EncodeUtf8(p));
  }
  if (from_right) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

StatusOr<std::vector<std::string>> PySplit(
    std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
    bool from_right) {
  if (!sep) return SplitWhitespace(s, maxsplit, from_right);
  if (sep->empty()) return JinjaError(ErrorKind::kValue, "empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::u32string cps = DecodeUtf8(s);
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    const char32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C ||
                     c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
                     c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (c == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    out.push_back(EncodeUtf8(cps.substr(start, (keepends ? end : i) - start)));
    start = i = end;
  }
  if (start < cps.size()) out.push_back(EncodeUtf8(cps.substr(start)));
  return out;
}

std::string PyUpper(std::string_view s) { return MapCase(s, ToUpperCp); }
std::string PyLower(std::string_view s) { return MapCase(s, ToLowerCp); }

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    const bool cased = IsAlphaCp(c);
    AppendUtf8(cased ? (prev_cased ? ToLowerCp(c) : ToUpperCp(c)) : c, &out);
    prev_cased = cased;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::u32string cps = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    AppendUtf8(i == 0 ? ToUpperCp(cps[i]) : ToLowerCp(cps[i]), &out);
  }
  return out;
}

std::string PySwapCase(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) {
    AppendUtf8(IsUpperCp(c) ? ToLowerCp(c) : ToUpperCp(c), &out);
  }
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old,
                      std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string cps = DecodeUtf8(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      if (i < cps.size()) AppendUtf8(cps[i], &out);
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(repl);
    start = at + old.size();
    ++n;
  }
  out.append(s.substr(start));
  return out;
}

int64_t PyFind(std::string_view s, std::string_view sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(Utf8Length(s.substr(0, at)));
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(Utf8Length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos;
       at = s.find(sub, at + sub.size())) {
    ++n;
  }
  return n;
}

std::string PyPad(std::string_view s, int64_t width, char32_t fill,
                  char align) {
  const int64_t len = static_cast<int64_t>(Utf8Length(s));
  if (width <= len) return std::string(s);
  const int64_t total = width - len;
  int64_t left = 0;
  if (align == '>') left = total;
  // Python's center puts the extra space on the right unless both the
  // padding and the width are odd.
  if (align == '^') left = total / 2 + (total & width & 1);
  std::string pad;
  AppendUtf8(fill, &pad);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += pad;
  out += s;
  for (int64_t i = left; i < total; ++i) out += pad;
  return out;
}

bool PyIsClass(std::string_view s, std::string_view cls) {
  std::u32string cps = DecodeUtf8(s);
  if (cps.empty()) return false;
  if (cls == "upper" || cls == "lower") {
    bool cased = false;
    for (char32_t c : cps) {
      if (cls == "upper" ? IsLowerCp(c) : IsUpperCp(c)) return false;
      cased |= cls == "upper" ? IsUpperCp(c) : IsLowerCp(c);
    }
    return cased;
  }
  if (cls == "title") return PyTitle(s) == s && PyIsClass(PyLower(s), "lower");
  for (char32_t c : cps) {
    bool ok = false;
    if (cls == "digit" || cls == "numeric" || cls == "decimal") {
      ok = IsDigitCp(c);
    } else if (cls == "alpha") {
      ok = IsAlphaCp(c);
    } else if (cls == "alnum") {
      ok = IsAlphaCp(c) || IsDigitCp(c);
    } else if (cls == "space") {
      ok = IsPySpace(c);
    }
    if (!ok) return false;
  }
  return true;
}

namespace {

struct Spec {
  char32_t fill = ' ';
  char align = '\0';
  char sign = '-';
  bool zero = false;
  int64_t width = -1;
  int64_t precision = -1;
  char type = '\0';
};

std::string FormatNumber(const Value& v, const Spec& spec) {
  char buf[512];
  const int prec =
      spec.precision < 0
          ? 6
          : static_cast<int>(std::min<int64_t>(spec.precision, 100));
  std::string out;
  switch (spec.type) {
    case 'f':
    case 'F':
      std::snprintf(buf, sizeof(buf), "%.*f", prec, v.AsDouble());
      return buf;
    case 'e':
    case 'E':
      std::snprintf(buf, sizeof(buf), spec.type == 'e' ? "%.*e" : "%.*E", prec,
                    v.AsDouble());
      return buf;
    case 'g':
    case 'G':
      std::snprintf(buf, sizeof(buf), "%.*g", prec, v.AsDouble());
      return buf;
    case 'x':
    case 'X':
    case 'o':
    case 'd':
      if (v.is_float()) return FloatRepr(v.AsDouble());
      std::snprintf(
          buf, sizeof(buf),
          spec.type == 'x'   ? "%llx"
          : spec.type == 'X' ? "%llX"
          : spec.type == 'o' ? "%llo"
                             : "%lld",
          static_cast<long long>(v.is_bool() ? v.bool_value() : v.int_value()));
      return buf;
    default:
      return ToStr(v);
  }
}

std::string ApplySpec(const Value& v, const Spec& spec) {
  std::string body;
  if (v.is_string()) {
    body = v.str();
    if (spec.precision >= 0) {
      std::u32string cps = DecodeUtf8(body);
      if (static_cast<int64_t>(cps.size()) > spec.precision) {
        body = EncodeUtf8(std::u32string_view(cps).substr(0, spec.precision));
      }
    }
  } else if (v.is_number() && spec.type != 's') {
    body = FormatNumber(v, spec);
    if (spec.sign == '+' && v.AsDouble() >= 0) body = "+" + body;
  } else {
    body = ToStr(v);
  }
  char align = spec.align;
  if (!align) align = v.is_number() && !v.is_bool() ? '>' : '<';
  const int64_t width = std::min<int64_t>(spec.width, 1 << 20);
  if (spec.zero && !spec.align && v.is_number()) {
    return PyPad(body, width, '0', '>');
  }
  return PyPad(body, width, spec.fill, align);
}

Spec ParseBraceSpec(std::string_view text) {
  Spec spec;
  std::u32string cps = DecodeUtf8(text);
  size_t i = 0;
  auto is_align = [](char32_t c) {
    return c == '<' || c == '>' || c == '^' || c == '=';
  };
  if (cps.size() >= 2 && is_align(cps[1])) {
    spec.fill = cps[0];
    spec.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    spec.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) {
    spec.sign = static_cast<char>(cps[i++]);
  }
  if (i < cps.size() && cps[i] == '0') {
    spec.zero = true;
    ++i;
  }
  int64_t w = -1;
  while (i < cps.size() && IsDigitCp(cps[i])) {
    w = std::max<int64_t>(w, 0) * 10 + (cps[i++] - '0');
    if (w > (1 << 20)) w = 1 << 20;
  }
  spec.width = w;
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    int64_t p = 0;
    while (i < cps.size() && IsDigitCp(cps[i])) {
      p = std::min<int64_t>(p * 10 + (cps[i++] - '0'), 1 << 20);
    }
    spec.precision = p;
  }
  if (i < cps.size()) spec.type = static_cast<char>(cps[i]);
  return spec;
}

}  // namespace

namespace {

// Returns the argument a str.format field ("", "0", "name") names.
StatusOr<const Value*> FormatField(std::string_view field, const CallArgs& args,
                                   size_t* auto_index) {
  const bool numeric = field.size() < 10 &&
                       std::all_of(field.begin(), field.end(),
                                   [](char d) { return d >= '0' && d <= '9'; });
  if (numeric) {
    const size_t index =
        field.empty() ? (*auto_index)++ : std::stoul(std::string(field));
    if (index >= args.positional.size()) {
      return JinjaError(ErrorKind::kValue,
                        "Replacement index " + std::to_string(index) +
                            " out of range for positional args tuple");
    }
    return &args.positional[index];
  }
  for (const auto& [k, val] : args.keyword) {
    if (k == field) return &val;
  }
  return JinjaError(ErrorKind::kValue,
                    "KeyError: '" + std::string(field) + "'");
}

}  // namespace

StatusOr<std::string> BraceFormat(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) {
      return JinjaError(ErrorKind::kValue,
                        "Single '{' encountered in format string");
    }
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec_text;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec_text = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      field = field.substr(0, bang);
    }
    KV_ASSIGN_OR_RETURN(const Value* v, FormatField(field, args, &auto_index));
    out += ApplySpec(*v, ParseBraceSpec(spec_text));
  }
  return out;
}

namespace {

// One %-conversion of printf-style formatting.
struct PercentSpec {
  std::optional<std::string> key;  // %(key)s
  Spec spec;
  char type = '\0';
};

// Parses the conversion after a '%' starting at fmt[*i]; leaves *i on the
// conversion type character.
StatusOr<PercentSpec> ParsePercentSpec(std::string_view fmt, size_t* i) {
  PercentSpec p;
  if (*i < fmt.size() && fmt[*i] == '(') {
    const size_t close = fmt.find(')', *i);
    if (close == std::string_view::npos) {
      return JinjaError(ErrorKind::kValue, "incomplete format key");
    }
    p.key = std::string(fmt.substr(*i + 1, close - *i - 1));
    *i = close + 1;
  }
  while (*i < fmt.size() && (fmt[*i] == '-' || fmt[*i] == '+' ||
                             fmt[*i] == ' ' || fmt[*i] == '0')) {
    if (fmt[*i] == '-') p.spec.align = '<';
    if (fmt[*i] == '0') p.spec.zero = true;
    if (fmt[*i] == '+') p.spec.sign = '+';
    ++*i;
  }
  size_t j = *i;
  while (j < fmt.size() &&
         ((fmt[j] >= '0' && fmt[j] <= '9') || fmt[j] == '.')) {
    ++j;
  }
  const Spec parsed = ParseBraceSpec(fmt.substr(*i, j - *i));
  p.spec.width = parsed.width;
  p.spec.precision = parsed.precision;
  *i = j;
  if (*i >= fmt.size()) {
    return JinjaError(ErrorKind::kValue, "incomplete format");
  }
  p.type = fmt[*i];
  p.spec.type = p.type == 'i' || p.type == 'u' ? 'd' : p.type;
  if (!p.spec.align && !p.spec.zero) p.spec.align = '>';
  return p;
}

StatusOr<std::string> FormatPercent(const PercentSpec& p, const Value& v) {
  if (p.type == 'r') return PyPad(Repr(v), p.spec.width, ' ', p.spec.align);
  if (p.type == 's') {
    Spec s = p.spec;
    s.type = 's';
    return ApplySpec(v.is_string() ? v : Value::String(ToStr(v)), s);
  }
  if (!v.is_number()) {
    return JinjaError(ErrorKind::kType, std::string("%") + p.type +
                                            " format: a real number is "
                                            "required, not " +
                                            TypeName(v));
  }
  if (p.spec.type == 'd' && v.is_float()) {
    return ApplySpec(Value::Int(static_cast<int64_t>(v.AsDouble())), p.spec);
  }
  return ApplySpec(v, p.spec);
}

}  // namespace

StatusOr<std::string> PercentFormat(std::string_view fmt, const Value& args) {
  std::vector<Value> list;
  if (args.kind() == ValueKind::kTuple) {
    list = args.items();
  } else {
    list.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    ++i;
    KV_ASSIGN_OR_RETURN(PercentSpec p, ParsePercentSpec(fmt, &i));
    if (p.type == '%') {
      out.push_back('%');
      continue;
    }
    const Value* v = nullptr;
    if (p.key) {
      if (!args.is_dict()) {
        return JinjaError(ErrorKind::kType, "format requires a mapping");
      }
      v = args.map().Find(*p.key);
      if (!v)
        return JinjaError(ErrorKind::kValue, "KeyError: '" + *p.key + "'");
    } else if (next < list.size()) {
      v = &list[next++];
    } else {
      return JinjaError(ErrorKind::kType,
                        "not enough arguments for format string");
    }
    KV_ASSIGN_OR_RETURN(std::string piece, FormatPercent(p, *v));
    out += piece;
  }
  if (next < list.size() && !args.is_dict()) {
    return JinjaError(ErrorKind::kType,
                      "not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace kvault::jinja
