// Tokenizer: text <-> token ids for a GGUF vocabulary, SentencePiece-style
// or byte-level BPE, with llama.cpp's behaviour (the shared/vocab vectors
// are its outputs):
//
//  * Special tokens in text: control, unknown and user-defined tokens are
//    cut out of the text before tokenizing, the longest token text first
//    (then the lowest id), each over every remaining piece of text. Control
//    and unknown tokens only when parse_special is on; user-defined tokens
//    always (as Hugging Face tokenizers do).
//  * SentencePiece: a space is prepended to the text, and again after every
//    special token, when add_space_prefix is set (the leading-space rule).
//  * add_special adds BOS / EOS when the vocabulary's add_bos / add_eos say
//    so.
//  * Detokenizing renders control and unknown tokens as "" unless
//    render_special; SentencePiece drops one leading space of the first
//    token after an optional leading BOS when add_space_prefix is set, so
//    Detokenize(Tokenize(x)) == x for ordinary text. Unlike llama.cpp's
//    llama_detokenize no "clean up" of spaces before punctuation is done
//    (it would break the round trip for BPE).
//  * Detokenize returns the raw bytes the tokens stand for (possibly
//    invalid UTF-8); StreamingDetokenizer only ever returns valid UTF-8.
//    The stream continues a prompt (generated tokens), so it applies no
//    leading-space rule: its text is the concatenation of the pieces, as
//    llama-server's output is.
//  * A Tokenizer is immutable after Create: its const methods may be called
//    from several threads at once.
#ifndef KVAULT_MODEL_TOKENIZER_H_
#define KVAULT_MODEL_TOKENIZER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_types.h"
#include "model/vocab.h"

namespace kvault {

class BpeTokenizer;
class GgufFile;
class SpmTokenizer;

class Tokenizer {
 public:
  // Validates `vocab` (Vocab::Validate, and a known pre-tokenizer for BPE)
  // and builds the tokenizer.
  static StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  // LoadVocab(gguf) followed by Create.
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Returns the token ids of `text` (any bytes; invalid UTF-8 is handled,
  // never rejected). add_special: BOS/EOS per the vocabulary; parse_special:
  // control tokens written in the text become those tokens.
  std::vector<TokenId> Tokenize(std::string_view text, bool add_special,
                                bool parse_special) const;
  // Returns the bytes token `id` stands for; "" for an id out of range, an
  // unused token, or a control/unknown token unless render_special.
  std::string_view TokenToPiece(TokenId id, bool render_special = false) const;
  // Returns the text of `ids` (see the file comment); remove_special drops a
  // leading BOS and a trailing EOS that add_special would have added.
  std::string Detokenize(std::span<const TokenId> ids,
                         bool remove_special = false,
                         bool render_special = false) const;

  // Returns the vocabulary.
  const Vocab& vocab() const { return vocab_; }
  // Returns the number of tokens.
  size_t num_tokens() const { return vocab_.size(); }
  // Returns the special/user-defined tokens matched in text, longest first.
  const std::vector<TokenId>& special_tokens() const { return special_ids_; }

 private:
  // A run of raw text [begin, begin + len) of the input, or a token.
  struct Fragment {
    TokenId token;  // -1 for raw text
    size_t begin;
    size_t len;
  };

  explicit Tokenizer(Vocab vocab);
  std::vector<Fragment> Partition(std::string_view text,
                                  bool parse_special) const;
  void BuildPieces();
  // Returns true when ids[index] is a BOS token at position 0 (the
  // leading-space rule applies to the token after it).
  bool IsLeadingBos(std::span<const TokenId> ids, size_t index) const;

  Vocab vocab_;
  TokenLookup lookup_;
  std::vector<TokenId> special_ids_;
  std::vector<std::string> pieces_;  // [num_tokens] rendered with specials
  std::unique_ptr<SpmTokenizer> spm_;
  std::unique_ptr<BpeTokenizer> bpe_;
};

// Detokenizes a stream of tokens one at a time without ever splitting a
// UTF-8 character: bytes of a character spread over several tokens (byte
// fallback, byte-level BPE) are held until the character is complete. Bytes
// that can never form a character are returned as U+FFFD.
class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit StreamingDetokenizer(const Tokenizer* tokenizer,
                                bool render_special = false);

  // Adds `id`; returns the text completed by it (valid UTF-8, possibly
  // empty).
  std::string Push(TokenId id);
  // Returns the held bytes as U+FFFD (one per incomplete character) and
  // starts a new stream.
  std::string Flush();
  // Returns the number of bytes held back.
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_TOKENIZER_H_
