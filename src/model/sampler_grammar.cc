#include "model/sampler_grammar.h"

#include <limits>
#include <string>

namespace kvault {

std::unique_ptr<TokenTrie> BuildGrammarTrie(const SamplerVocab& vocab) {
  std::vector<std::string> pieces(vocab.size());
  std::vector<bool> skip(vocab.size());
  for (size_t id = 0; id < vocab.size(); ++id) {
    const TokenId t = static_cast<TokenId>(id);
    skip[id] = vocab.IsEndOfGeneration(t);
    if (!skip[id]) pieces[id] = vocab.Piece(t);
  }
  return std::make_unique<TokenTrie>(
      pieces, [&skip](uint32_t id) { return bool(skip[id]); });
}

SamplerGrammar::SamplerGrammar(std::shared_ptr<const Grammar> grammar,
                               const SamplerVocab* vocab,
                               const TokenTrie* trie)
    : matcher_(std::move(grammar)), vocab_(vocab), trie_(trie) {}

bool SamplerGrammar::Allows(TokenId token) const {
  if (vocab_->IsEndOfGeneration(token)) return matcher_.IsComplete();
  const std::string piece = vocab_->Piece(token);
  return !piece.empty() && matcher_.CanAccept(piece);
}

bool SamplerGrammar::Mask(std::span<float> logits) const {
  matcher_.AllowedTokens(*trie_, &allowed_);
  const bool eog_ok = matcher_.IsComplete();
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    const TokenId t = static_cast<TokenId>(id);
    const bool ok = id < allowed_.size() && allowed_[id] != 0
                        ? true
                        : eog_ok && vocab_->IsEndOfGeneration(t);
    if (!ok) logits[id] = -std::numeric_limits<float>::infinity();
    any |= ok;
  }
  return any;
}

Status SamplerGrammar::StuckError() const {
  if (!matcher_.status().ok()) return matcher_.status();
  return InvalidArgumentError(
             "the grammar is incomplete here and no token of the vocabulary "
             "continues it")
      .WithReason(kReasonGrammarDeadEnd);
}

void SamplerGrammar::Accept(TokenId token) {
  if (vocab_->IsEndOfGeneration(token)) return;
  // A token the chain was forced to (every logit masked) may not fit; the
  // matcher then keeps its state and the next step masks again.
  (void)matcher_.AcceptBytes(vocab_->Piece(token));
}

}  // namespace kvault
