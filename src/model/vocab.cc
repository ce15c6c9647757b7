#include "model/vocab.h"

#include <array>
#include <initializer_list>
#include <utility>

#include "core/check.h"
#include "model/gguf_file.h"
#include "model/pre_tokenizer.h"

namespace kvault {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kBosKey = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kEosKey = "tokenizer.ggml.eos_token_id";
constexpr std::string_view kUnkKey = "tokenizer.ggml.unknown_token_id";
constexpr std::string_view kPadKey = "tokenizer.ggml.padding_token_id";
constexpr std::string_view kEotKey = "tokenizer.ggml.eot_token_id";
constexpr std::string_view kFimPreKey = "tokenizer.ggml.fim_pre_token_id";
constexpr std::string_view kFimSufKey = "tokenizer.ggml.fim_suf_token_id";
constexpr std::string_view kFimMidKey = "tokenizer.ggml.fim_mid_token_id";
constexpr std::string_view kFimPadKey = "tokenizer.ggml.fim_pad_token_id";
constexpr std::string_view kFimRepKey = "tokenizer.ggml.fim_rep_token_id";
constexpr std::string_view kFimSepKey = "tokenizer.ggml.fim_sep_token_id";
constexpr std::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpaceKey = "tokenizer.ggml.add_space_prefix";

// Texts llama.cpp recognises as an end-of-turn token when no key names one,
// in the order kvault prefers them when several exist.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",  // DeepSeek
};

// The special-id fields of `v` (Vocab or const Vocab) with their GGUF keys.
template <typename V>
auto SpecialIds(V* v) {
  using Field = decltype(&v->bos);
  return std::array<std::pair<std::string_view, Field>, 11>{
      {{kBosKey, &v->bos},
       {kEosKey, &v->eos},
       {kUnkKey, &v->unk},
       {kPadKey, &v->pad},
       {kEotKey, &v->eot},
       {kFimPreKey, &v->fim_pre},
       {kFimSufKey, &v->fim_suf},
       {kFimMidKey, &v->fim_mid},
       {kFimPadKey, &v->fim_pad},
       {kFimRepKey, &v->fim_rep},
       {kFimSepKey, &v->fim_sep}}};
}

// The usual texts of the fill-in-the-middle tokens, for vocabularies whose
// GGUF names none (the spellings of Qwen, StarCoder, DeepSeek, CodeLlama,
// CodeGemma, ...).
struct FimTexts {
  std::optional<TokenId> Vocab::*field;
  std::initializer_list<std::string_view> texts;
};
const FimTexts kFimTexts[] = {
    {&Vocab::fim_pre,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
      "<｜fim▁begin｜>", "<PRE>",
      "▁<PRE>", "<|code_prefix|>"}},
    {&Vocab::fim_suf,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
      "<｜fim▁hole｜>", "<SUF>",
      "▁<SUF>", "<|code_suffix|>"}},
    {&Vocab::fim_mid,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
      "<｜fim▁end｜>", "<MID>",
      "▁<MID>", "<|code_middle|>"}},
    {&Vocab::fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>"}},
    {&Vocab::fim_rep,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {&Vocab::fim_sep, {"<|file_sep|>"}},
};

// Finds the fill-in-the-middle tokens no key named by their texts.
void DetectFim(Vocab* v) {
  const TokenLookup lookup = BuildTokenLookup(*v);
  for (const FimTexts& fim : kFimTexts) {
    std::optional<TokenId>& field = v->*fim.field;
    for (std::string_view text : fim.texts) {
      if (field) break;
      auto it = lookup.find(text);
      if (it != lookup.end()) field = it->second;
    }
  }
}

Status ReadOptionalBool(const GgufFile& gguf, std::string_view key, bool* out) {
  if (!gguf.Has(key)) return Status::Ok();
  KV_ASSIGN_OR_RETURN(*out, gguf.GetBool(key));
  return Status::Ok();
}

// Scores are float32 in practice; llama.cpp also accepts int32.
StatusOr<std::vector<float>> ReadScores(const GgufFile& gguf) {
  StatusOr<std::vector<float>> scores = gguf.GetFloatArray(kScoresKey);
  if (scores.ok()) return scores;
  StatusOr<std::vector<int64_t>> ints = gguf.GetIntArray(kScoresKey);
  if (!ints.ok()) return scores.status();
  return std::vector<float>(ints->begin(), ints->end());
}

StatusOr<std::vector<TokenType>> ReadTypes(const GgufFile& gguf) {
  KV_ASSIGN_OR_RETURN(std::vector<int64_t> raw, gguf.GetIntArray(kTypesKey));
  std::vector<TokenType> types;
  types.reserve(raw.size());
  for (int64_t t : raw) {
    // llama.cpp treats values it does not know as "undefined".
    types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t)
                                     : TokenType::kUndefined);
  }
  return types;
}

Status ReadSpecialIds(const GgufFile& gguf, Vocab* v) {
  for (auto [key, field] : SpecialIds(v)) {
    if (!gguf.Has(key)) continue;
    KV_ASSIGN_OR_RETURN(int64_t id, gguf.GetInt(key));
    // Converters write "no such token" as -1, often as uint32 0xFFFFFFFF
    // (stories260K's padding id): not an error.
    if (id == -1 || id == int64_t{0xFFFFFFFF}) {
      *field = std::nullopt;
      continue;
    }
    if (id < 0 || static_cast<uint64_t>(id) >= v->size()) {
      return InvalidArgumentError("GGUF metadata key '" + std::string(key) +
                                  "': token id " + std::to_string(id) +
                                  " is out of range (vocabulary has " +
                                  std::to_string(v->size()) + " tokens)");
    }
    *field = static_cast<TokenId>(id);
  }
  return Status::Ok();
}

// Finds the EOT token by its text and makes it a control token, as llama.cpp
// does, so that it is never rendered as text by accident.
void DetectEot(Vocab* v) {
  if (v->eot) return;
  for (std::string_view text : kEotTexts) {
    for (size_t id = 0; id < v->size(); ++id) {
      if (v->tokens[id] != text) continue;
      v->eot = static_cast<TokenId>(id);
      if (!v->types.empty()) v->types[id] = TokenType::kControl;
      return;
    }
  }
}

Status CheckPerTokenSize(size_t actual, size_t expected, std::string_view key) {
  if (actual == 0 || actual == expected) return Status::Ok();
  return InvalidArgumentError("GGUF metadata key '" + std::string(key) +
                              "' has " + std::to_string(actual) +
                              " entries, expected one per token (" +
                              std::to_string(expected) + ")");
}

}  // namespace

TokenType Vocab::type(TokenId id) const {
  KV_CHECK(Contains(id)) << "token id " << id;
  return types.empty() ? TokenType::kNormal : types[id];
}

float Vocab::score(TokenId id) const {
  KV_CHECK(Contains(id)) << "token id " << id;
  return scores.empty() ? 0.0f : scores[id];
}

bool Vocab::IsEndOfGeneration(TokenId id) const {
  return (eos && *eos == id) || (eot && *eot == id);
}

Status Vocab::Validate() const {
  if (tokens.empty()) {
    return InvalidArgumentError("vocabulary has no tokens (" +
                                std::string(kTokensKey) + ")");
  }
  KV_RETURN_IF_ERROR(CheckPerTokenSize(scores.size(), size(), kScoresKey));
  KV_RETURN_IF_ERROR(CheckPerTokenSize(types.size(), size(), kTypesKey));
  TokenLookup seen;
  seen.reserve(size());
  for (size_t id = 0; id < size(); ++id) {
    if (tokens[id].empty()) {
      return InvalidArgumentError("token " + std::to_string(id) +
                                  " is empty (" + std::string(kTokensKey) +
                                  ")");
    }
    auto [it, inserted] = seen.emplace(tokens[id], static_cast<TokenId>(id));
    if (!inserted) {
      return InvalidArgumentError("duplicate token '" + tokens[id] +
                                  "' at ids " + std::to_string(it->second) +
                                  " and " + std::to_string(id) + " (" +
                                  std::string(kTokensKey) + ")");
    }
  }
  for (auto [key, field] : SpecialIds(this)) {
    if (*field && !Contains(**field)) {
      return InvalidArgumentError(std::string(key) + " = " +
                                  std::to_string(**field) +
                                  " is out of range (vocabulary has " +
                                  std::to_string(size()) + " tokens)");
    }
  }
  if (add_bos && !bos) {
    return InvalidArgumentError(std::string(kAddBosKey) + " is true but " +
                                std::string(kBosKey) + " is not set");
  }
  if (add_eos && !eos) {
    return InvalidArgumentError(std::string(kAddEosKey) + " is true but " +
                                std::string(kEosKey) + " is not set");
  }
  return Status::Ok();
}

Status ApplyVocabDefaults(Vocab* vocab) {
  if (vocab->kind == VocabKind::kSpm) {
    vocab->bos = 1, vocab->eos = 2, vocab->unk = 0;
    vocab->add_bos = true;
    vocab->add_space_prefix = true;
  } else {
    KV_ASSIGN_OR_RETURN(PreTokenizerInfo pre, LookupPreTokenizer(vocab->pre));
    vocab->bos = 11, vocab->eos = 11, vocab->unk = std::nullopt;
    vocab->add_bos = pre.add_bos;
    vocab->add_space_prefix = false;
  }
  vocab->pad = std::nullopt;
  vocab->eot = std::nullopt;
  vocab->add_eos = false;
  for (auto [key, field] : SpecialIds(vocab)) {
    if (*field && !vocab->Contains(**field)) *field = std::nullopt;
  }
  return Status::Ok();
}

StatusOr<Vocab> LoadVocab(const GgufFile& gguf) {
  Vocab v;
  KV_ASSIGN_OR_RETURN(std::string model, gguf.GetString(kModelKey));
  if (model == "llama") {
    v.kind = VocabKind::kSpm;
  } else if (model == "gpt2") {
    v.kind = VocabKind::kBpe;
  } else {
    return UnimplementedError("tokenizer model '" + model + "' (" +
                              std::string(kModelKey) +
                              ") is not supported; kvault reads 'llama' "
                              "(SentencePiece) and 'gpt2' (byte-level BPE)");
  }
  if (gguf.Has(kPreKey)) {
    KV_ASSIGN_OR_RETURN(v.pre, gguf.GetString(kPreKey));
  }
  KV_ASSIGN_OR_RETURN(v.tokens, gguf.GetStringArray(kTokensKey));
  for (size_t id = 0; id < v.size(); ++id) {
    // llama.cpp renames empty tokens so that they can never match text.
    if (v.tokens[id].empty()) {
      v.tokens[id] = "[EMPTY_" + std::to_string(id) + "]";
    }
  }
  if (gguf.Has(kScoresKey)) {
    KV_ASSIGN_OR_RETURN(v.scores, ReadScores(gguf));
  }
  if (gguf.Has(kTypesKey)) {
    KV_ASSIGN_OR_RETURN(v.types, ReadTypes(gguf));
  }
  KV_RETURN_IF_ERROR(CheckPerTokenSize(v.scores.size(), v.size(), kScoresKey));
  KV_RETURN_IF_ERROR(CheckPerTokenSize(v.types.size(), v.size(), kTypesKey));
  if (v.kind == VocabKind::kBpe) {
    KV_ASSIGN_OR_RETURN(v.merges, gguf.GetStringArray(kMergesKey));
  }
  KV_RETURN_IF_ERROR(ApplyVocabDefaults(&v));
  KV_RETURN_IF_ERROR(ReadSpecialIds(gguf, &v));
  KV_RETURN_IF_ERROR(ReadOptionalBool(gguf, kAddBosKey, &v.add_bos));
  KV_RETURN_IF_ERROR(ReadOptionalBool(gguf, kAddEosKey, &v.add_eos));
  KV_RETURN_IF_ERROR(ReadOptionalBool(gguf, kAddSpaceKey, &v.add_space_prefix));
  DetectEot(&v);
  DetectFim(&v);
  KV_RETURN_IF_ERROR(v.Validate());
  return v;
}

TokenLookup BuildTokenLookup(const Vocab& vocab) {
  TokenLookup lookup;
  lookup.reserve(vocab.size());
  for (size_t id = 0; id < vocab.size(); ++id) {
    lookup[vocab.tokens[id]] = static_cast<TokenId>(id);
  }
  return lookup;
}

}  // namespace kvault
