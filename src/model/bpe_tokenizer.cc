#include "model/bpe_tokenizer.h"

#include <array>
#include <optional>

#include "model/symbol_merge.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 256 + 68> from_unicode{};  // code point -> byte
};

const ByteTables& Tables() {
  static const ByteTables tables = [] {
    ByteTables t;
    t.from_unicode.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? b : next_extra++;
      t.to_unicode[b] = cp;
      t.to_utf8[b] = EncodeUtf8(cp);
      t.from_unicode[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteToUnicode(uint8_t b) { return Tables().to_unicode[b]; }

int UnicodeToByte(char32_t cp) {
  const ByteTables& t = Tables();
  return cp < t.from_unicode.size() ? t.from_unicode[cp] : -1;
}

std::string ByteLevelEncode(std::string_view bytes) {
  const ByteTables& t = Tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::string ByteLevelDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Decoded d = DecodeUtf8At(text, pos);
    const int byte =
        d.step == Utf8Step::kValid ? UnicodeToByte(d.code_point) : -1;
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(pos, d.num_bytes));
    }
    pos += d.num_bytes;
  }
  return out;
}

BpeTokenizer::BpeTokenizer(const Vocab& vocab, const TokenLookup& lookup,
                           PreTokenizerInfo pre)
    : lookup_(lookup), pre_(pre.type), ignore_merges_(pre.ignore_merges) {
  ranks_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& line = vocab.merges[rank];
    // llama.cpp splits at the first space after the first byte; a line
    // without one can never match a pair of non-empty pieces.
    if (line.find(' ', 1) == std::string::npos) continue;
    ranks_.emplace(line, static_cast<int>(rank));
  }
}

int BpeTokenizer::MergeRank(std::string_view left,
                            std::string_view right) const {
  std::string scratch;
  return MergeRank(left, right, &scratch);
}

int BpeTokenizer::MergeRank(std::string_view left, std::string_view right,
                            std::string* scratch) const {
  scratch->assign(left);
  scratch->push_back(' ');
  scratch->append(right);
  auto it = ranks_.find(*scratch);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::Encode(std::string_view text,
                          std::vector<TokenId>* out) const {
  for (const std::string& word : pre_.Split(text)) {
    EncodeWord(ByteLevelEncode(word), out);
  }
}

void BpeTokenizer::EncodeWord(std::string_view word,
                              std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = lookup_.find(word); it != lookup_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<MergeSymbol> symbols = SplitIntoSymbols(word);
  std::string scratch;
  // Lower merge ranks merge first: the priority is the negated rank.
  MergeBestPairs(word, symbols,
                 [&](std::string_view a,
                     std::string_view b) -> std::optional<double> {
                   const int rank = MergeRank(a, b, &scratch);
                   if (rank < 0) return std::nullopt;
                   return -static_cast<double>(rank);
                 });
  auto text_of = [&](const MergeSymbol& s) {
    return word.substr(s.begin, s.len);
  };
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text_of(symbols[i]);
    if (auto it = lookup_.find(piece); it != lookup_.end()) {
      out->push_back(it->second);
      continue;
    }
    for (size_t j = 0; j < piece.size(); ++j) {
      if (auto it = lookup_.find(piece.substr(j, 1)); it != lookup_.end()) {
        out->push_back(it->second);
      }
    }
  }
}

}  // namespace kvault
