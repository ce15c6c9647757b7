// SpmTokenizer: SentencePiece-style tokenization (tokenizer.ggml.model =
// "llama"), as llama.cpp implements it.
//
// Every space becomes U+2581 ("▁"); the text is cut into UTF-8 characters
// (by lead byte, see Utf8LeadLength) and adjacent pieces are merged while
// their concatenation is a token, always the pair whose token has the
// highest score (leftmost on ties). A final piece that is not a token is
// written as byte-fallback tokens <0xNN>, one per byte (a token holding the
// byte itself when the vocabulary has no <0xNN>, else the unknown token).
// The caller adds the prefix space (the leading-space rule) before calling.
#ifndef KVAULT_MODEL_SPM_TOKENIZER_H_
#define KVAULT_MODEL_SPM_TOKENIZER_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"
#include "model/vocab.h"

namespace kvault {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Returns `text` with every ' ' replaced by kSpmSpace.
std::string SpmEscapeSpaces(std::string_view text);
// Returns `text` with every kSpmSpace replaced by ' '.
std::string SpmUnescapeSpaces(std::string_view text);
// Returns the byte a "<0xNN>" token text stands for, or nullopt when `text`
// is not of that form.
std::optional<uint8_t> ParseByteToken(std::string_view text);

class SpmTokenizer {
 public:
  // `vocab` and `lookup` (BuildTokenLookup(vocab)) must outlive this object.
  SpmTokenizer(const Vocab& vocab, const TokenLookup& lookup);

  // Appends the tokens of `text` (raw; spaces are escaped here).
  void Encode(std::string_view text, std::vector<TokenId>* out) const;
  // Returns the token that byte-fallback writes for `byte`, or nullopt when
  // the vocabulary has none (the byte is then dropped).
  std::optional<TokenId> ByteToken(uint8_t byte) const;

 private:
  const Vocab& vocab_;
  const TokenLookup& lookup_;
  std::array<TokenId, 256> byte_tokens_;  // -1 where none
};

}  // namespace kvault

#endif  // KVAULT_MODEL_SPM_TOKENIZER_H_
