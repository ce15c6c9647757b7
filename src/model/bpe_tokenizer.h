// BpeTokenizer: byte-level BPE (tokenizer.ggml.model = "gpt2").
//
// Text is split into words by the PreTokenizer; each word's bytes are
// written as printable code points (GPT-2's byte-to-unicode table: the bytes
// '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other 68
// bytes for U+0100.. in byte order); the word's characters are then merged
// pairwise, always the adjacent pair whose merge has the lowest rank (its
// index in tokenizer.ggml.merges; leftmost on ties), until no pair is in
// the merge list. Each resulting piece is a token; a piece that is not (only
// possible with inconsistent vocabularies) falls back to its single-byte
// tokens, skipping those that do not exist — as llama.cpp does.
#ifndef KVAULT_MODEL_BPE_TOKENIZER_H_
#define KVAULT_MODEL_BPE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/kv_types.h"
#include "model/pre_tokenizer.h"
#include "model/vocab.h"

namespace kvault {

// Returns the code point GPT-2's byte-level alphabet writes byte `b` as.
char32_t ByteToUnicode(uint8_t b);
// Returns the byte code point `cp` stands for, or -1 when it stands for none.
int UnicodeToByte(char32_t cp);
// Writes every byte of `bytes` in the byte-level alphabet (UTF-8 result).
std::string ByteLevelEncode(std::string_view bytes);
// Inverse of ByteLevelEncode; code points outside the alphabet (and invalid
// UTF-8) are copied through unchanged.
std::string ByteLevelDecode(std::string_view text);

class BpeTokenizer {
 public:
  // `vocab` and `lookup` (BuildTokenLookup(vocab)) must outlive this object.
  BpeTokenizer(const Vocab& vocab, const TokenLookup& lookup,
               PreTokenizerInfo pre);

  // Appends the tokens of `text` (raw bytes; no special-token parsing).
  void Encode(std::string_view text, std::vector<TokenId>* out) const;
  // Appends the tokens of one pre-tokenized word already written in the
  // byte-level alphabet.
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;
  // Returns the rank of merging `left` and `right`, or -1 when not a merge.
  int MergeRank(std::string_view left, std::string_view right) const;

 private:
  int MergeRank(std::string_view left, std::string_view right,
                std::string* scratch) const;

  const TokenLookup& lookup_;
  PreTokenizer pre_;
  bool ignore_merges_;
  // "left right" (the merge line) -> rank; the first occurrence wins.
  std::unordered_map<std::string, int> ranks_;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_BPE_TOKENIZER_H_
