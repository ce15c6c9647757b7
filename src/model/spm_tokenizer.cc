#include "model/spm_tokenizer.h"

#include <optional>

#include "model/symbol_merge.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string ReplaceAll(std::string_view text, std::string_view from,
                       std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;
       pos = hit + from.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

std::string SpmEscapeSpaces(std::string_view text) {
  return ReplaceAll(text, " ", kSpmSpace);
}

std::string SpmUnescapeSpaces(std::string_view text) {
  return ReplaceAll(text, kSpmSpace, " ");
}

std::optional<uint8_t> ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') {
    return std::nullopt;
  }
  const int hi = HexValue(text[3]);
  const int lo = HexValue(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

SpmTokenizer::SpmTokenizer(const Vocab& vocab, const TokenLookup& lookup)
    : vocab_(vocab), lookup_(lookup) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    const char raw = static_cast<char>(b);
    auto it = lookup_.find(std::string_view(name, sizeof(name)));
    if (it == lookup_.end()) it = lookup_.find(std::string_view(&raw, 1));
    byte_tokens_[b] =
        it != lookup_.end() ? it->second : vocab_.unk.value_or(-1);
  }
}

std::optional<TokenId> SpmTokenizer::ByteToken(uint8_t byte) const {
  const TokenId id = byte_tokens_[byte];
  return id >= 0 ? std::optional<TokenId>(id) : std::nullopt;
}

void SpmTokenizer::Encode(std::string_view raw_text,
                          std::vector<TokenId>* out) const {
  const std::string text = SpmEscapeSpaces(raw_text);
  if (text.empty()) return;
  std::vector<MergeSymbol> symbols = SplitIntoSymbols(text);
  // A pair may merge when the joined piece is a token; its score ranks it.
  MergeBestPairs(text, symbols,
                 [&](std::string_view a,
                     std::string_view b) -> std::optional<double> {
                   const std::string_view joined(a.data(), a.size() + b.size());
                   auto it = lookup_.find(joined);
                   if (it == lookup_.end()) return std::nullopt;
                   return vocab_.score(it->second);
                 });
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece =
        std::string_view(text).substr(symbols[i].begin, symbols[i].len);
    if (auto it = lookup_.find(piece); it != lookup_.end()) {
      out->push_back(it->second);
      continue;
    }
    for (char c : piece) {
      if (auto id = ByteToken(static_cast<uint8_t>(c))) out->push_back(*id);
    }
  }
}

}  // namespace kvault
