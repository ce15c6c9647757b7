// GrammarMatcher: constrained decoding against a compiled Grammar. It
// advances over the bytes of sampled tokens (a token may end inside a
// multi-byte UTF-8 character; the rest arrives with the next token), says
// whether EOS is allowed, and computes which tokens of a vocabulary may
// come next. Copying a matcher is cheap enough to clone per candidate.
// Not thread-safe; a copy per thread is.
#ifndef KVAULT_GRAMMAR_GRAMMAR_MATCHER_H_
#define KVAULT_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/match_state.h"
#include "grammar/token_trie.h"

namespace kvault {

class ByteAutomaton;

class GrammarMatcher {
 public:
  // Starts at the beginning of `grammar`'s root rule (non-null).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                          MatchLimits limits = MatchLimits());
  // Copies the parse state; the copy starts with an empty token cache.
  GrammarMatcher(const GrammarMatcher& other);
  GrammarMatcher& operator=(const GrammarMatcher& other);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  // Consumes `bytes` when the grammar allows all of them and returns true;
  // otherwise returns false and leaves the state unchanged.
  bool AcceptBytes(std::string_view bytes);
  // Returns true when AcceptBytes(bytes) would succeed (state untouched):
  // the quick check of the top candidate before a full mask is computed.
  bool CanAccept(std::string_view bytes) const;
  // Returns true when the input so far completes the root rule: EOS is
  // allowed here.
  bool IsComplete() const { return state_.IsComplete(); }
  // Returns true when some further byte is allowed (false: only EOS, or
  // nothing at all after an error).
  bool CanContinue() const { return state_.CanContinue(); }
  // Resizes `allowed` to trie.vocab_size() and sets allowed[id] to 1 for
  // every token whose bytes can be accepted next, 0 for the rest (EOS and
  // excluded tokens are the caller's: see IsComplete()). Transitions found
  // here are cached in this matcher for its later calls.
  void AllowedTokens(const TokenTrie& trie,
                     std::vector<uint8_t>* allowed) const;
  // Returns OK, or why the matcher is stuck (a MatchLimits bound was hit
  // by the start state or by the last rejected AcceptBytes).
  const Status& status() const { return status_; }
  // Returns to the start of the grammar.
  void Reset();
  // Returns the grammar being matched.
  const Grammar& grammar() const { return *grammar_; }

 private:
  StepResult Advance(std::string_view bytes, MatchState* state) const;

  std::shared_ptr<const Grammar> grammar_;
  MatchLimits limits_;
  MatchState state_;
  Status status_;
  // Byte transitions between parse states, kept across AllowedTokens calls
  // (they depend only on the grammar); built lazily, never shared.
  mutable std::unique_ptr<ByteAutomaton> dfa_;
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_GRAMMAR_MATCHER_H_
