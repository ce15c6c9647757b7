// MatchState: where a matcher is in a grammar. It is the set of parse
// stacks that are still alive (each stack lists the grammar positions still
// to be matched, innermost last; after expansion every top is a character
// class, and an empty stack means the root rule is complete), plus the
// bytes of a UTF-8 sequence that a token ended in the middle of.
#ifndef KVAULT_GRAMMAR_MATCH_STATE_H_
#define KVAULT_GRAMMAR_MATCH_STATE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace kvault {

using ParseStack = std::vector<uint32_t>;

// Bounds that keep hostile grammars from exhausting time or memory.
struct MatchLimits {
  size_t max_stacks = 4096;  // alive stacks in one state
  size_t max_depth = 2048;   // positions in one stack (nesting depth)
  size_t max_work = 65536;   // stacks visited while expanding one step
};

enum class StepResult {
  kOk,     // the byte was accepted
  kDead,   // the grammar does not allow the byte here
  kLimit,  // a MatchLimits bound was hit; treated as a rejection
};

class MatchState {
 public:
  // The state before any input: the root rule's alternatives, expanded.
  // Returns kLimit when even that exceeds `limits`.
  static StepResult Initial(const Grammar& g, const MatchLimits& limits,
                            MatchState* out);

  // Advances by one byte in place; on kDead or kLimit the state is
  // unspecified (callers step a copy when they need to keep it).
  StepResult Step(const Grammar& g, const MatchLimits& limits, uint8_t byte);

  // Returns false when `byte` certainly cannot be accepted next: a cheap
  // test on the stack tops, without copying the state.
  bool MayAccept(const Grammar& g, uint8_t byte) const;
  // Returns true when the input so far is a complete sentence (EOS allowed).
  bool IsComplete() const;
  // Returns true when at least one more byte can be accepted.
  bool CanContinue() const;
  // Returns true when no stack is alive.
  bool empty() const { return stacks_.empty(); }
  // Returns true while a multi-byte UTF-8 character is half received.
  bool in_partial_char() const { return need_ > 0; }

  bool operator==(const MatchState& o) const {
    return partial_ == o.partial_ && need_ == o.need_ && len_ == o.len_ &&
           stacks_ == o.stacks_;
  }
  // Returns a hash consistent with ==.
  size_t Hash() const;

 private:
  StepResult AdvanceCodePoint(const Grammar& g, const MatchLimits& limits,
                              uint32_t cp);
  bool PartialViable(const Grammar& g) const;

  std::vector<ParseStack> stacks_;  // sorted, unique
  uint32_t partial_ = 0;            // bits of the half-received character
  uint8_t need_ = 0;                // continuation bytes still expected
  uint8_t len_ = 0;                 // total length of that character
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_MATCH_STATE_H_
