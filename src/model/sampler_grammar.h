// SamplerGrammar: a request's grammar as the sampler applies it, the way
// llama.cpp's common_sampler does. The chain samples as usual; when the
// grammar rejects the token it chose, the logits of every token the grammar
// does not allow are set to -inf and the chain samples again (so an
// unconstrained pick costs one check, not a vocabulary mask). An
// end-of-generation token is allowed only where the grammar is complete; a
// token with no text never.
#ifndef KVAULT_MODEL_SAMPLER_GRAMMAR_H_
#define KVAULT_MODEL_SAMPLER_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_trie.h"
#include "model/sampler_vocab.h"

namespace kvault {

// Builds the trie of `vocab`'s token pieces the grammar walks: control and
// end-of-generation tokens, and pieces with no bytes, are left out.
std::unique_ptr<TokenTrie> BuildGrammarTrie(const SamplerVocab& vocab);

class SamplerGrammar {
 public:
  // `vocab` and `trie` (BuildGrammarTrie(*vocab)) must outlive this.
  SamplerGrammar(std::shared_ptr<const Grammar> grammar,
                 const SamplerVocab* vocab, const TokenTrie* trie);

  // Returns true when the grammar allows `token` next.
  bool Allows(TokenId token) const;
  // Sets every logit the grammar does not allow next to -inf; returns
  // false when that leaves none.
  bool Mask(std::span<float> logits) const;
  // Advances over `token` (as Allows must have said yes to it); an
  // end-of-generation token ends the grammar's input.
  void Accept(TokenId token);
  // Returns why no token was allowed after Mask returned false: the
  // matcher's limit error (grammar_limit_exceeded), or grammar_dead_end.
  Status StuckError() const;

 private:
  GrammarMatcher matcher_;
  const SamplerVocab* vocab_;
  const TokenTrie* trie_;
  mutable std::vector<uint8_t> allowed_;  // reused by Mask
};

}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLER_GRAMMAR_H_
