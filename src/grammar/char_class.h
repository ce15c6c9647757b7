// CharClass: a set of code points (a GBNF literal character, `[...]`,
// `[^...]` or `.`), normalised to sorted disjoint ranges with an ASCII
// bitmap so the hot path of the matcher is one bit test.
#ifndef KVAULT_GRAMMAR_CHAR_CLASS_H_
#define KVAULT_GRAMMAR_CHAR_CLASS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvault {

struct CodeRange {
  uint32_t lo;
  uint32_t hi;  // inclusive
};

class CharClass {
 public:
  // Builds the class of `ranges` (any order, may overlap), or of their
  // complement within [0, U+10FFFF] when `negated`.
  CharClass(bool negated, std::vector<CodeRange> ranges);

  // Returns true when `cp` is in the class.
  bool Matches(uint32_t cp) const {
    if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1;
    return MatchesSlow(cp);
  }
  // Returns true when some code point in [lo, hi] is in the class (used to
  // keep a partial UTF-8 sequence alive only when it can still match).
  bool IntersectsRange(uint32_t lo, uint32_t hi) const;
  // Returns the class in GBNF notation, e.g. `[^a-z]` (for messages).
  std::string ToString() const;

  bool operator==(const CharClass& o) const {
    return negated_ == o.negated_ && ranges_.size() == o.ranges_.size() &&
           std::equal(ranges_.begin(), ranges_.end(), o.ranges_.begin(),
                      [](const CodeRange& a, const CodeRange& b) {
                        return a.lo == b.lo && a.hi == b.hi;
                      });
  }

 private:
  bool MatchesSlow(uint32_t cp) const;
  // True when `cp` falls in one of ranges_ (before negation).
  bool InRanges(uint32_t cp) const;

  bool negated_;
  std::vector<CodeRange> ranges_;  // sorted, disjoint, non-adjacent
  uint64_t ascii_[2] = {0, 0};     // membership after negation
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_CHAR_CLASS_H_
