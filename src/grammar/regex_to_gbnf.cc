#include "grammar/regex_to_gbnf.h"

#include <utility>

#include "grammar/gbnf_parser.h"
#include "grammar/schema_rules.h"
#include "grammar/utf8.h"

namespace kvault {
namespace {

constexpr int kMaxDepth = 50;

// The JSON text of code point `cp` inside a string (escaped when needed).
std::string JsonCharText(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      break;
  }
  std::string out;
  if (cp < 0x20) {
    static constexpr char kHex[] = "0123456789abcdef";
    out = "\\u00";
    out.push_back(kHex[cp >> 4]);
    out.push_back(kHex[cp & 15]);
  } else {
    AppendUtf8(cp, &out);
  }
  return out;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Characters JSON must escape; they are matched as escapes, never raw.
const std::vector<CodeRange>& Escaped() {
  static const std::vector<CodeRange> kEscaped = {
      {0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  return kEscaped;
}

// `ranges` minus the characters JSON escapes.
std::vector<CodeRange> RawPart(const std::vector<CodeRange>& ranges) {
  std::vector<CodeRange> out;
  for (CodeRange r : ranges) {
    std::vector<CodeRange> pieces = {r};
    for (const CodeRange& e : Escaped()) {
      std::vector<CodeRange> next;
      for (const CodeRange& p : pieces) {
        if (p.hi < e.lo || p.lo > e.hi) {
          next.push_back(p);
          continue;
        }
        if (p.lo < e.lo) next.push_back({p.lo, e.lo - 1});
        if (p.hi > e.hi) next.push_back({e.hi + 1, p.hi});
      }
      pieces = std::move(next);
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }
  return out;
}

}  // namespace

StatusOr<std::string> RegexToGbnf::Convert(std::string_view pattern) {
  // Anchors: ^ first, and a $ last that is not itself escaped.
  size_t slashes = 0;
  for (size_t i = pattern.size() - 1; i > 0 && pattern[i - 1] == '\\'; --i) {
    ++slashes;
  }
  if (pattern.size() < 2 || pattern.front() != '^' || pattern.back() != '$' ||
      slashes % 2 == 1) {
    return InvalidArgumentError(
        "only patterns anchored with '^' and '$' are supported");
  }
  RegexToGbnf p(pattern.substr(1, pattern.size() - 2));
  KV_ASSIGN_OR_RETURN(std::string expr, p.ParseAlternation(0));
  if (!p.AtEnd()) return p.Error("unmatched ')'");
  return expr.empty() ? "\"\"" : expr;
}

Status RegexToGbnf::Error(const std::string& what) const {
  return InvalidArgumentError(what + " at offset " + std::to_string(pos_ + 1) +
                              " of the pattern");
}

StatusOr<std::string> RegexToGbnf::ParseAlternation(int depth) {
  KV_ASSIGN_OR_RETURN(std::string first, ParseSequence(depth));
  if (Peek() != '|') return first;
  std::string out = "( " + first;
  while (Peek() == '|') {
    ++pos_;
    KV_ASSIGN_OR_RETURN(std::string alt, ParseSequence(depth));
    out += " | " + alt;
  }
  return out + " )";
}

StatusOr<std::string> RegexToGbnf::ParseSequence(int depth) {
  std::string out;
  while (!AtEnd() && Peek() != '|' && Peek() != ')') {
    KV_ASSIGN_OR_RETURN(std::string atom, ParseAtom(depth));
    KV_ASSIGN_OR_RETURN(std::string quant, ParseQuantifier());
    if (!quant.empty()) atom = "( " + atom + " )" + quant;
    out += (out.empty() ? "" : " ") + atom;
  }
  return out;
}

StatusOr<std::string> RegexToGbnf::ParseQuantifier() {
  const char c = Peek();
  std::string q;
  if (c == '*' || c == '+' || c == '?') {
    ++pos_;
    q = std::string(1, c);
  } else if (c == '{') {
    ++pos_;
    uint64_t min = 0, max = 0;
    bool has_max = true, any = false;
    while (Peek() >= '0' && Peek() <= '9' && min <= 100000) {
      min = min * 10 + static_cast<uint64_t>(Peek() - '0');
      ++pos_;
      any = true;
    }
    max = min;
    if (Peek() == ',') {
      ++pos_;
      has_max = Peek() != '}';
      max = 0;
      while (Peek() >= '0' && Peek() <= '9' && max <= 100000) {
        max = max * 10 + static_cast<uint64_t>(Peek() - '0');
        ++pos_;
      }
    }
    if (!any || Peek() != '}') return Error("malformed {m,n} quantifier");
    ++pos_;
    if (min > GbnfParser::kMaxRepetition ||
        (has_max && max > GbnfParser::kMaxRepetition)) {
      return Error("repetition count above " +
                   std::to_string(GbnfParser::kMaxRepetition));
    }
    if (has_max && max < min) return Error("quantifier {m,n} with n < m");
    q = "{" + std::to_string(min) +
        (has_max ? (max == min ? "" : "," + std::to_string(max)) : ",") + "}";
  } else {
    return std::string();
  }
  if (Peek() == '?') ++pos_;  // lazy: the same set of full matches
  if (Peek() == '+') return Error("possessive quantifiers are not supported");
  if (Peek() == '*' || Peek() == '{') return Error("nothing to repeat");
  return q;
}

StatusOr<std::string> RegexToGbnf::ParseGroup(int depth) {
  ++pos_;  // '('
  if (depth + 1 > kMaxDepth) return Error("groups nested too deeply");
  if (Peek() == '?') {
    const std::string_view rest = re_.substr(pos_);
    if (rest.substr(0, 2) == "?:") {
      pos_ += 2;
    } else if (rest.substr(0, 2) == "?<" && rest.substr(0, 3) != "?<=" &&
               rest.substr(0, 3) != "?<!") {
      const size_t close = re_.find('>', pos_);
      if (close == std::string_view::npos) return Error("unclosed group name");
      pos_ = close + 1;
    } else {
      return Error("lookaround and other (?...) groups are not supported");
    }
  }
  KV_ASSIGN_OR_RETURN(std::string inner, ParseAlternation(depth + 1));
  if (Peek() != ')') return Error("expected ')'");
  ++pos_;
  return "( " + inner + " )";
}

StatusOr<std::string> RegexToGbnf::ParseAtom(int depth) {
  const char c = Peek();
  if (c == '(') return ParseGroup(depth);
  if (c == '.') {
    ++pos_;
    return std::string("char");
  }
  if (c == '^' || c == '$') return Error("anchors inside the pattern");
  if (c == '*' || c == '+' || c == '?' || c == '{') {
    return Error("nothing to repeat");
  }
  std::vector<CodeRange> ranges;
  bool negated = false;
  if (c == '[') {
    KV_RETURN_IF_ERROR(ParseClass(&ranges, &negated));
    return ClassExpr(ranges, negated);
  }
  uint32_t cp = 0;
  if (c == '\\') {
    ++pos_;
    KV_ASSIGN_OR_RETURN(bool is_class, ParseEscape(&cp, &ranges, &negated));
    if (is_class) return ClassExpr(ranges, negated);
  } else {
    KV_ASSIGN_OR_RETURN(cp, ParseCodePoint());
  }
  return GbnfLiteral(JsonCharText(cp));
}

StatusOr<uint32_t> RegexToGbnf::ParseCodePoint() {
  uint32_t cp = 0;
  size_t len = 0;
  if (!DecodeUtf8(re_.substr(pos_), &cp, &len)) return Error("invalid UTF-8");
  pos_ += len;
  return cp;
}

StatusOr<bool> RegexToGbnf::ParseEscape(uint32_t* cp,
                                        std::vector<CodeRange>* ranges,
                                        bool* negated) {
  if (AtEnd()) return Error("pattern ends with '\\'");
  const char c = re_[pos_++];
  static const std::vector<CodeRange> kDigit = {{'0', '9'}};
  static const std::vector<CodeRange> kWord = {
      {'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  static const std::vector<CodeRange> kSpace = {{'\t', '\r'},
                                                {' ', ' '},
                                                {0xA0, 0xA0},
                                                {0x2028, 0x2029},
                                                {0xFEFF, 0xFEFF}};
  const std::vector<CodeRange>* cls = nullptr;
  switch (c) {
    case 'd':
    case 'D':
      cls = &kDigit;
      break;
    case 'w':
    case 'W':
      cls = &kWord;
      break;
    case 's':
    case 'S':
      cls = &kSpace;
      break;
    case 'n':
      *cp = '\n';
      return false;
    case 'r':
      *cp = '\r';
      return false;
    case 't':
      *cp = '\t';
      return false;
    case 'f':
      *cp = '\f';
      return false;
    case 'v':
      *cp = '\v';
      return false;
    case '0':
      *cp = 0;
      return false;
    case 'x':
    case 'u': {
      const int digits = c == 'x' ? 2 : 4;
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = Hex(Peek());
        if (h < 0)
          return Error("expected hex digits after \\" + std::string(1, c));
        v = v * 16 + static_cast<uint32_t>(h);
        ++pos_;
      }
      *cp = v;
      return false;
    }
    default:
      break;
  }
  if (cls != nullptr) {
    ranges->insert(ranges->end(), cls->begin(), cls->end());
    *negated = c >= 'A' && c <= 'Z';
    return true;
  }
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
      (c >= '0' && c <= '9')) {
    return Error("escape '\\" + std::string(1, c) +
                 "' (word boundaries, backreferences, ...) is not supported");
  }
  --pos_;
  KV_ASSIGN_OR_RETURN(*cp, ParseCodePoint());  // escaped punctuation
  return false;
}

Status RegexToGbnf::ParseClass(std::vector<CodeRange>* ranges, bool* negated) {
  ++pos_;  // '['
  *negated = Peek() == '^';
  if (*negated) ++pos_;
  bool first = true;
  while (first || Peek() != ']') {
    first = false;
    if (AtEnd()) return Error("unclosed character class");
    uint32_t lo = 0;
    if (Peek() == '\\') {
      ++pos_;
      std::vector<CodeRange> sub;
      bool sub_negated = false;
      KV_ASSIGN_OR_RETURN(bool is_class, ParseEscape(&lo, &sub, &sub_negated));
      if (is_class) {
        if (sub_negated) return Error("\\D \\W \\S inside [...]");
        ranges->insert(ranges->end(), sub.begin(), sub.end());
        continue;
      }
    } else {
      KV_ASSIGN_OR_RETURN(lo, ParseCodePoint());
    }
    uint32_t hi = lo;
    if (Peek() == '-' && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
      ++pos_;
      if (Peek() == '\\') {
        ++pos_;
        std::vector<CodeRange> sub;
        bool sub_negated = false;
        KV_ASSIGN_OR_RETURN(bool is_class,
                            ParseEscape(&hi, &sub, &sub_negated));
        if (is_class) return Error("a class escape cannot end a range");
      } else {
        KV_ASSIGN_OR_RETURN(hi, ParseCodePoint());
      }
      if (hi < lo) return Error("character range out of order");
    }
    ranges->push_back({lo, hi});
  }
  ++pos_;  // ']'
  return Status::Ok();
}

// A class as JSON text: characters JSON writes raw form one GBNF class,
// those it must escape become escape literals.
StatusOr<std::string> RegexToGbnf::ClassExpr(
    const std::vector<CodeRange>& ranges, bool negated) const {
  std::vector<std::string> alts;
  if (negated) {
    std::vector<CodeRange> excluded = ranges;
    excluded.insert(excluded.end(), Escaped().begin(), Escaped().end());
    alts.push_back(CharClass(true, excluded).ToString());
  } else {
    const std::vector<CodeRange> raw = RawPart(ranges);
    if (!raw.empty()) alts.push_back(CharClass(false, raw).ToString());
  }
  const CharClass members(negated, ranges);
  for (uint32_t cp : {0x22u, 0x5Cu, 0x0Au, 0x0Du, 0x09u, 0x08u, 0x0Cu}) {
    if (members.Matches(cp)) alts.push_back(GbnfLiteral(JsonCharText(cp)));
  }
  if (alts.empty()) return Error("character class matches nothing");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

}  // namespace kvault
