#include "model/tokenizer.h"

#include <algorithm>
#include <utility>

#include "model/bpe_tokenizer.h"
#include "model/gguf_file.h"
#include "model/pre_tokenizer.h"
#include "model/spm_tokenizer.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown ||
         t == TokenType::kUserDefined;
}

// Control and unknown tokens are rendered only on request.
bool IsHiddenType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

// The bytes token `id` stands for when special tokens are rendered.
std::string RenderToken(const Vocab& vocab, TokenId id) {
  const std::string& text = vocab.tokens[id];
  switch (vocab.type(id)) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return text;
    case TokenType::kNormal:
      return vocab.kind == VocabKind::kSpm ? SpmUnescapeSpaces(text)
                                           : ByteLevelDecode(text);
    case TokenType::kByte:
      if (auto byte = ParseByteToken(text)) return std::string(1, *byte);
      return text;
    case TokenType::kUnused:
    case TokenType::kUndefined:
      break;
  }
  return "";
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  KV_RETURN_IF_ERROR(vocab.Validate());
  PreTokenizerInfo pre;
  if (vocab.kind == VocabKind::kBpe) {
    KV_ASSIGN_OR_RETURN(pre, LookupPreTokenizer(vocab.pre));
  }
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  const Vocab& v = t->vocab_;
  t->lookup_ = BuildTokenLookup(v);
  for (size_t id = 0; id < v.size(); ++id) {
    if (IsSpecialType(v.type(id))) t->special_ids_.push_back(id);
  }
  std::stable_sort(t->special_ids_.begin(), t->special_ids_.end(),
                   [&v](TokenId a, TokenId b) {
                     return v.tokens[a].size() > v.tokens[b].size();
                   });
  t->BuildPieces();
  if (v.kind == VocabKind::kSpm) {
    t->spm_ = std::make_unique<SpmTokenizer>(v, t->lookup_);
  } else {
    t->bpe_ = std::make_unique<BpeTokenizer>(v, t->lookup_, pre);
  }
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  KV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocab(gguf));
  return Create(std::move(vocab));
}

void Tokenizer::BuildPieces() {
  pieces_.reserve(vocab_.size());
  for (size_t id = 0; id < vocab_.size(); ++id) {
    pieces_.push_back(RenderToken(vocab_, static_cast<TokenId>(id)));
  }
}

std::vector<Tokenizer::Fragment> Tokenizer::Partition(
    std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId id : special_ids_) {
    if (!parse_special && IsHiddenType(vocab_.type(id))) continue;
    const std::string& special = vocab_.tokens[id];
    // Cheap rejection: most special tokens never occur in a given text.
    if (text.find(special) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view piece = text.substr(f.begin, f.len);
      size_t pos = 0;
      for (size_t hit; (hit = piece.find(special, pos)) != piece.npos;
           pos = hit + special.size()) {
        if (hit > pos) next.push_back({-1, f.begin + pos, hit - pos});
        next.push_back({id, 0, 0});
      }
      if (pos < piece.size()) {
        next.push_back({-1, f.begin + pos, piece.size() - pos});
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

std::vector<TokenId> Tokenizer::Tokenize(std::string_view text,
                                         bool add_special,
                                         bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos) out.push_back(*vocab_.bos);
  // SentencePiece's leading-space rule: a space before the text and after
  // each special token.
  bool prev_special = true;
  for (const Fragment& f : Partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.len);
    if (spm_) {
      if (vocab_.add_space_prefix && prev_special) {
        spm_->Encode(std::string(" ").append(raw), &out);
      } else {
        spm_->Encode(raw, &out);
      }
    } else {
      bpe_->Encode(raw, &out);
    }
    prev_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(*vocab_.eos);
  return out;
}

std::string_view Tokenizer::TokenToPiece(TokenId id,
                                         bool render_special) const {
  if (!vocab_.Contains(id)) return {};
  if (!render_special && IsHiddenType(vocab_.type(id))) return {};
  return pieces_[id];
}

bool Tokenizer::IsLeadingBos(std::span<const TokenId> ids, size_t index) const {
  return index == 0 && !ids.empty() && vocab_.bos && ids[0] == *vocab_.bos;
}

std::string Tokenizer::Detokenize(std::span<const TokenId> ids,
                                  bool remove_special,
                                  bool render_special) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool leading_bos = IsLeadingBos(ids, i);
    if (remove_special && vocab_.add_bos && leading_bos) continue;
    if (remove_special && vocab_.add_eos && i + 1 == ids.size() && vocab_.eos &&
        ids[i] == *vocab_.eos) {
      continue;
    }
    std::string_view piece = TokenToPiece(ids[i], render_special);
    if (leading_bos) {  // the rule applies to the text after the BOS
      out.append(piece);
      continue;
    }
    if (strip_space && !piece.empty() && piece[0] == ' ') {
      piece.remove_prefix(1);
    }
    strip_space = false;
    out.append(piece);
  }
  return out;
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer* tokenizer,
                                           bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamingDetokenizer::Push(TokenId id) {
  const std::string_view piece = tokenizer_->TokenToPiece(id, render_special_);
  pending_.append(piece);
  // Emit every complete character; keep a truncated one at the end.
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Decoded d = DecodeUtf8At(pending_, pos);
    if (d.step == Utf8Step::kIncomplete) break;
    if (d.step == Utf8Step::kValid) {
      out.append(pending_, pos, d.num_bytes);
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += d.num_bytes;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvault
