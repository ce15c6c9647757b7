// SamplerVocab: what the samplers need to know about token texts. DRY turns
// its sequence-breaker strings into token sequences by scanning every
// token's text, and the infill sampler merges candidates whose pieces share
// a prefix; both read the vocabulary through this interface, so the sampler
// does not depend on a particular tokenizer.
#ifndef KVAULT_MODEL_SAMPLER_VOCAB_H_
#define KVAULT_MODEL_SAMPLER_VOCAB_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"
#include "model/sampling_params.h"

namespace kvault {

class Tokenizer;
struct Vocab;

class SamplerVocab {
 public:
  virtual ~SamplerVocab() = default;

  // Returns the number of tokens.
  virtual size_t size() const = 0;
  // Returns token `id` rendered alone with special tokens shown, as
  // llama.cpp's llama_vocab::detokenize({id}, true) does (DRY).
  virtual std::string TokenText(TokenId id) const = 0;
  // Returns the tokens of `text` without BOS/EOS and without parsing
  // special tokens (DRY's breaker tails).
  virtual std::vector<TokenId> Tokenize(std::string_view text) const = 0;
  // Returns the bytes token `id` stands for, control tokens as "" (infill).
  virtual std::string Piece(TokenId id) const = 0;
  // Returns true for end-of-generation tokens (infill).
  virtual bool IsEndOfGeneration(TokenId id) const = 0;
  // Returns the end-of-turn token, else end-of-sequence, if any (infill).
  virtual std::optional<TokenId> EndOfTurnOrSequence() const = 0;
};

// A SamplerVocab over kvault's Tokenizer (not owned; must outlive this).
// TokenText is Detokenize({id}, render_special): llama.cpp's text exactly
// for SentencePiece vocabularies; llama.cpp's optional "clean spaces" pass
// of some BPE vocabularies (" ." -> ".") is not applied.
class TokenizerSamplerVocab final : public SamplerVocab {
 public:
  explicit TokenizerSamplerVocab(const Tokenizer* tokenizer)
      : tokenizer_(tokenizer) {}

  size_t size() const override;
  std::string TokenText(TokenId id) const override;
  std::vector<TokenId> Tokenize(std::string_view text) const override;
  std::string Piece(TokenId id) const override;
  bool IsEndOfGeneration(TokenId id) const override;
  std::optional<TokenId> EndOfTurnOrSequence() const override;

 private:
  const Tokenizer* tokenizer_;
};

// Returns {id, -inf} for every end-of-generation token of `vocab` in id
// order: what llama-server appends to logit_bias for ignore_eos.
std::vector<LogitBias> EogLogitBias(const Vocab& vocab);

}  // namespace kvault

#endif  // KVAULT_MODEL_SAMPLER_VOCAB_H_
