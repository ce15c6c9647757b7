// PreTokenizer: splits text into the "words" a byte-level BPE tokenizer
// merges within, following the split rules llama.cpp applies for each
// tokenizer.ggml.pre name. The rules are llama.cpp's regular expressions
// (facts of those tokenizers), written here as hand-made scanners — no regex
// engine — with the same leftmost-first semantics:
//
//   gpt2 (also mpt, olmo, ...):
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   llama3 (llama-bpe, dbrx, ...), and qwen2 with \p{N} instead of \p{N}{1,3}:
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   starcoder (also refact, command-r, ...): \p{N} then the gpt2 rule
//   falcon: [\p{P}\$\+<=>\^~\|`]+ , gpt2 rule, [0-9][0-9][0-9]
//   default: [\p{P}\$\+<=>\^~\|]+ , gpt2 rule, \p{N}+ , [0-9][0-9][0-9]
//   deepseek-llm: [\r\n] , \s?[Latin/Greek/... letters]+ ,
//     \s?[!-/:-~ fullwidth and CJK punctuation]+ , \s+$ , [CJK/Hangul]+ ,
//     \p{N}+
//   deepseek-coder: [\r\n] , \s?\p{L}+ , \s?\p{P}+ , [CJK/Hangul]+ , \p{N}
//   tekken (Mistral): [^\r\n\p{L}\p{N}]?U*L+|[^\r\n\p{L}\p{N}]?U+L*|\p{N}|
//     ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ with U the
//     cased-upper letters (Lu Lt Lm Lo) and L the lower ones (Ll Lm Lo)
// A rule list is applied in order; each rule splits every piece the previous
// one produced into matches and the text between them (both kept).
//
// Where llama.cpp runs a rule through std::regex it first maps every
// non-ASCII code point to one byte per category (whitespace first); the
// scanners reproduce that: e.g. a non-ASCII whitespace character is never
// punctuation, and ASCII classes are the plain ASCII ranges.
#ifndef KVAULT_MODEL_PRE_TOKENIZER_H_
#define KVAULT_MODEL_PRE_TOKENIZER_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault {

enum class PreTokenizerType {
  kDefault,
  kGpt2,
  kLlama3,
  kQwen2,
  kStarcoder,
  kDeepseekLlm,
  kFalcon,
  kDeepseekCoder,
  kTekken,
};

// What a tokenizer.ggml.pre name implies, as llama.cpp's vocabulary loader
// sets it.
struct PreTokenizerInfo {
  PreTokenizerType type = PreTokenizerType::kDefault;
  // A word that is itself a token is emitted whole, before any merging.
  bool ignore_merges = false;
  // The add_bos default when tokenizer.ggml.add_bos_token is absent.
  bool add_bos = false;
};

// Resolves a tokenizer.ggml.pre name ("" means "default"); InvalidArgument
// naming the pre-tokenizer when it is not one kvault implements.
StatusOr<PreTokenizerInfo> LookupPreTokenizer(std::string_view name);
// Returns a short stable name of `type`, e.g. "llama3".
std::string_view PreTokenizerTypeName(PreTokenizerType type);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreTokenizerType type) : type_(type) {}

  // Splits `text` into words. Invalid UTF-8 is decoded leniently (see
  // DecodeUtf8Lenient), so the words concatenate to the re-encoded text,
  // which equals `text` whenever `text` is valid UTF-8.
  std::vector<std::string> Split(std::string_view text) const;
  // Splits decoded code points; returns the word lengths in code points
  // (all > 0, summing to cpts.size()).
  std::vector<size_t> SplitCodePoints(std::span<const char32_t> cpts) const;

  PreTokenizerType type() const { return type_; }

 private:
  PreTokenizerType type_;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_PRE_TOKENIZER_H_
