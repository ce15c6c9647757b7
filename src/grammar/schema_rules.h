// Building blocks of the JSON schema -> GBNF conversion: the fixed rules
// for JSON primitives and string formats, GBNF string literals, and exact
// grammars for bounded integer ranges.
#ifndef KVAULT_GRAMMAR_SCHEMA_RULES_H_
#define KVAULT_GRAMMAR_SCHEMA_RULES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvault {

// Integers outside +-kIntegerBound have more than 16 digits; the grammars
// stop there so that generation terminates (as llama.cpp does).
inline constexpr int64_t kIntegerBound = 9999999999999999;

// Returns the body of fixed rule `name` ("ws", "string", "number", "date",
// ...) or "" when `name` is not one. Bodies refer only to fixed rules.
std::string_view FixedRuleBody(std::string_view name);
// Returns the fixed rules that `name`'s body refers to.
std::vector<std::string_view> FixedRuleDeps(std::string_view name);
// Returns true when `name` is reserved for a fixed rule.
bool IsFixedRuleName(std::string_view name);

// Returns `utf8` as a GBNF string literal, quotes included.
std::string GbnfLiteral(std::string_view utf8);

// Returns a GBNF expression matching exactly the decimal integers in
// [lo, hi] (no leading zeros, "-" for negatives, no "-0"); requires
// -kIntegerBound <= lo <= hi <= kIntegerBound.
std::string IntegerRangeExpr(int64_t lo, int64_t hi);

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_SCHEMA_RULES_H_
