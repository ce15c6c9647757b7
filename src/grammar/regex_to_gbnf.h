// RegexToGbnf: the JSON schema "pattern" keyword for a practical subset of
// ECMA-262 regular expressions, as a GBNF expression over the *JSON text*
// of a string's contents (so a '"' in the regex becomes the escape \" in
// the output). Supported: ^...$ anchoring (required: patterns are searched
// otherwise, which a grammar of the whole string cannot express), literals,
// escapes (\d \w \s \D \W \S \n \t \r \xHH \uHHHH, escaped punctuation),
// classes [...] / [^...] with ranges, '.', groups ( ), (?: ), (?<name> ),
// alternation, and the quantifiers * + ? {m} {m,} {m,n} (lazy forms too,
// which mean the same for a full match). Lookaround, backreferences and
// word boundaries are refused.
#ifndef KVAULT_GRAMMAR_REGEX_TO_GBNF_H_
#define KVAULT_GRAMMAR_REGEX_TO_GBNF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "grammar/char_class.h"

namespace kvault {

class RegexToGbnf {
 public:
  // Returns the GBNF expression (it may refer to the fixed rule `char`) or
  // InvalidArgument naming the unsupported construct and its offset.
  static StatusOr<std::string> Convert(std::string_view pattern);

 private:
  explicit RegexToGbnf(std::string_view body) : re_(body) {}

  StatusOr<std::string> ParseAlternation(int depth);
  StatusOr<std::string> ParseSequence(int depth);
  StatusOr<std::string> ParseAtom(int depth);
  StatusOr<std::string> ParseGroup(int depth);
  StatusOr<std::string> ParseQuantifier();
  Status ParseClass(std::vector<CodeRange>* ranges, bool* negated);
  // Reads one escape after '\'; a class escape (\d ...) fills `ranges` and
  // `negated` and returns true, a character sets `cp` and returns false.
  StatusOr<bool> ParseEscape(uint32_t* cp, std::vector<CodeRange>* ranges,
                             bool* negated);
  StatusOr<uint32_t> ParseCodePoint();
  StatusOr<std::string> ClassExpr(const std::vector<CodeRange>& ranges,
                                  bool negated) const;
  Status Error(const std::string& what) const;

  bool AtEnd() const { return pos_ >= re_.size(); }
  char Peek() const { return AtEnd() ? '\0' : re_[pos_]; }

  std::string_view re_;
  size_t pos_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_REGEX_TO_GBNF_H_
