// Vocab: a tokenizer's vocabulary as a GGUF file's tokenizer.ggml.* keys
// describe it, plus the defaults llama.cpp applies when a key is absent.
//
// Defaults (facts of llama.cpp's vocabulary loader):
//   tokenizer.ggml.model = "llama" (SentencePiece): bos 1, eos 2, unk 0,
//     add_bos true, add_eos false, add_space_prefix true.
//   tokenizer.ggml.model = "gpt2" (byte-level BPE): bos 11, eos 11, no unk,
//     add_bos false (true for the llama3 pre-tokenizer names), add_eos
//     false, add_space_prefix false.
//   A default special id outside the vocabulary is dropped; scores default
//   to 0 and token types to normal (1). A special id of -1 / 0xFFFFFFFF in
//   the file means "none"; any other id outside the vocabulary is an error
//   (llama.cpp only warns). The EOT token, when no key names it,
//   is found by its text (<|eot_id|>, <|im_end|>, <|end|>, ...).
#ifndef KVAULT_MODEL_VOCAB_H_
#define KVAULT_MODEL_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/status_or.h"
#include "kv/kv_types.h"

namespace kvault {

class GgufFile;

enum class VocabKind {
  kSpm,  // tokenizer.ggml.model "llama"
  kBpe,  // tokenizer.ggml.model "gpt2"
};

// tokenizer.ggml.token_type values (a fact of the GGUF format).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string pre;                  // tokenizer.ggml.pre ("" = "default")
  std::vector<std::string> tokens;  // [num_tokens] token texts, id order
  std::vector<float> scores;        // [num_tokens] or empty (all 0)
  std::vector<TokenType> types;     // [num_tokens] or empty (all normal)
  std::vector<std::string> merges;  // BPE only: "left right", rank order
  std::optional<TokenId> bos, eos, unk, pad, eot;
  // Fill-in-the-middle tokens (/infill): prefix, suffix, middle, padding,
  // repository name and file separator; from tokenizer.ggml.fim_*_token_id
  // or found by their usual texts.
  std::optional<TokenId> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // Returns the number of tokens.
  size_t size() const { return tokens.size(); }
  // Returns true when `id` is a valid token id.
  bool Contains(TokenId id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens.size();
  }
  // Returns the type of `id` (normal when types is empty); precondition:
  // Contains(id).
  TokenType type(TokenId id) const;
  // Returns the score of `id` (0 when scores is empty); precondition:
  // Contains(id).
  float score(TokenId id) const;
  // Returns true when id is the EOS or EOT token.
  bool IsEndOfGeneration(TokenId id) const;

  // Checks the vocabulary is self-consistent: at least one token, no empty or
  // duplicate token text, scores/types empty or one per token, special ids in
  // range, add_bos/add_eos only with a bos/eos id. InvalidArgument naming the
  // offending field (with its GGUF key) otherwise.
  Status Validate() const;
};

// Sets add_bos/add_eos/add_space_prefix and the special ids to llama.cpp's
// defaults for vocab->kind (and vocab->pre for BPE); InvalidArgument for an
// unknown BPE pre-tokenizer name.
Status ApplyVocabDefaults(Vocab* vocab);

// Reads the tokenizer.ggml.* keys of `gguf`, applies the defaults above and
// validates. Errors name the GGUF key: NotFound for a missing required key
// (tokenizer.ggml.model, .tokens, and .merges for gpt2), InvalidArgument for
// a wrong type, an inconsistent size or an id out of range, Unimplemented
// for a tokenizer model other than llama and gpt2.
StatusOr<Vocab> LoadVocab(const GgufFile& gguf);

// Token text -> id; the views point into the vocabulary's strings, so the
// vocabulary must outlive the map and stay unchanged.
using TokenLookup = std::unordered_map<std::string_view, TokenId>;

// Builds the text -> id map of `vocab` (the last id wins on duplicates;
// Validate rejects those).
TokenLookup BuildTokenLookup(const Vocab& vocab);

}  // namespace kvault

#endif  // KVAULT_MODEL_VOCAB_H_
