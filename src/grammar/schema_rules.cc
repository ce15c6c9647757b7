#include "grammar/schema_rules.h"

#include <algorithm>

namespace kvault {
namespace {

struct FixedRule {
  std::string_view name;
  std::string_view body;
  std::vector<std::string_view> deps;
};

// Whitespace between tokens is bounded (at most two newlines and twenty
// spaces or tabs) so that a model cannot pad forever.
const std::vector<FixedRule>& FixedRules() {
  static const std::vector<FixedRule> kRules = {
      {"ws", R"(| " " | "\n"{1,2} [ \t]{0,20})", {}},
      {"char",
       R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))",
       {}},
      {"string", R"("\"" char* "\"" ws)", {"char", "ws"}},
      {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}) ws)", {"ws"}},
      {"number",
       R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? )"
       R"(([eE] [-+]? [0-9]{1,3})? ws)",
       {"ws"}},
      {"boolean", R"(("true" | "false") ws)", {"ws"}},
      {"null", R"("null" ws)", {"ws"}},
      {"value",
       "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? )"
       R"("}" ws)",
       {"ws", "string", "value"}},
      {"array",
       R"("[" ws ( value ( "," ws value )* )? "]" ws)",
       {"ws", "value"}},
      {"date",
       R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" )"
       R"(( "0" [1-9] | [12] [0-9] | "3" [01] ))",
       {}},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] )"
       R"(( "." [0-9]{1,9} )? ( [Zz] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" )"
       R"([0-5] [0-9] ))",
       {}},
      {"date-time", R"(date [Tt] time)", {"date", "time"}},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" )"
       R"([0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})",
       {}},
  };
  return kRules;
}

const FixedRule* FindFixed(std::string_view name) {
  for (const FixedRule& r : FixedRules()) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string Nines(size_t n) { return std::string(n, '9'); }

// All strings of a.size() digits between a and b (same length, a <= b),
// leading zeros included: the tails of a multi-digit range.
std::string FixedWidth(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return "\"" + a + "\"";
  if (a == std::string(n, '0') && b == Nines(n)) {
    return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
  }
  if (n == 1) return std::string("[") + a[0] + "-" + b[0] + "]";
  const std::string at = a.substr(1), bt = b.substr(1);
  if (a[0] == b[0]) return "\"" + a.substr(0, 1) + "\" " + FixedWidth(at, bt);
  std::vector<std::string> alts;
  alts.push_back("\"" + a.substr(0, 1) + "\" " + FixedWidth(at, Nines(n - 1)));
  if (a[0] + 1 <= b[0] - 1) {
    alts.push_back(std::string("[") + static_cast<char>(a[0] + 1) + "-" +
                   static_cast<char>(b[0] - 1) + "] " +
                   FixedWidth(std::string(n - 1, '0'), Nines(n - 1)));
  }
  alts.push_back("\"" + b.substr(0, 1) + "\" " +
                 FixedWidth(std::string(n - 1, '0'), bt));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    out += (i ? " | " : "") + alts[i];
  }
  return out + ")";
}

// Non-negative [lo, hi]: one FixedWidth range per number of digits, each
// starting at 10^(d-1) so no leading zero is produced.
void NonNegative(int64_t lo, int64_t hi, std::vector<std::string>* alts) {
  int64_t low_of_width = 0, high_of_width = 9;
  while (lo <= hi) {
    if (lo <= high_of_width) {
      const int64_t a = std::max(lo, low_of_width);
      const int64_t b = std::min(hi, high_of_width);
      alts->push_back(FixedWidth(std::to_string(a), std::to_string(b)));
      lo = b + 1;
    }
    if (high_of_width > kIntegerBound) break;
    low_of_width = high_of_width + 1;
    high_of_width = high_of_width * 10 + 9;
  }
}

}  // namespace

std::string_view FixedRuleBody(std::string_view name) {
  const FixedRule* r = FindFixed(name);
  return r ? r->body : std::string_view();
}

std::vector<std::string_view> FixedRuleDeps(std::string_view name) {
  const FixedRule* r = FindFixed(name);
  return r ? r->deps : std::vector<std::string_view>();
}

bool IsFixedRuleName(std::string_view name) {
  return FindFixed(name) != nullptr || name == "root";
}

std::string GbnfLiteral(std::string_view utf8) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : utf8) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7F) {
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    } else {
      out.push_back(c);  // printable ASCII and UTF-8 bytes as they are
    }
  }
  return out + "\"";
}

std::string IntegerRangeExpr(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) {
    // Negative part: "-" followed by the magnitudes.
    std::vector<std::string> neg;
    NonNegative(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo, &neg);
    std::string part = "\"-\" (";
    for (size_t i = 0; i < neg.size(); ++i) part += (i ? " | " : "") + neg[i];
    alts.push_back(part + ")");
  }
  if (hi >= 0) NonNegative(std::max<int64_t>(lo, 0), hi, &alts);
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace kvault
