#include "model/sampler_vocab.h"

#include <limits>
#include <span>

#include "model/tokenizer.h"
#include "model/vocab.h"

namespace kvault {

size_t TokenizerSamplerVocab::size() const { return tokenizer_->num_tokens(); }

std::string TokenizerSamplerVocab::TokenText(TokenId id) const {
  const TokenId ids[] = {id};
  return tokenizer_->Detokenize(ids, /*remove_special=*/false,
                                /*render_special=*/true);
}

std::vector<TokenId> TokenizerSamplerVocab::Tokenize(
    std::string_view text) const {
  return tokenizer_->Tokenize(text, /*add_special=*/false,
                              /*parse_special=*/false);
}

std::string TokenizerSamplerVocab::Piece(TokenId id) const {
  return std::string(tokenizer_->TokenToPiece(id, /*render_special=*/false));
}

bool TokenizerSamplerVocab::IsEndOfGeneration(TokenId id) const {
  return tokenizer_->vocab().IsEndOfGeneration(id);
}

std::optional<TokenId> TokenizerSamplerVocab::EndOfTurnOrSequence() const {
  const Vocab& vocab = tokenizer_->vocab();
  return vocab.eot ? vocab.eot : vocab.eos;
}

std::vector<LogitBias> EogLogitBias(const Vocab& vocab) {
  std::vector<LogitBias> biases;
  for (size_t i = 0; i < vocab.size(); ++i) {
    const TokenId id = static_cast<TokenId>(i);
    if (vocab.IsEndOfGeneration(id)) {
      biases.push_back({id, -std::numeric_limits<float>::infinity()});
    }
  }
  return biases;
}

}  // namespace kvault
