#include "model/pre_tokenizer_classes.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "model/unicode_text.h"

namespace kvault::pre_tokenizer_classes {
namespace {

using Range = std::pair<char32_t, char32_t>;  // inclusive

// The bracket classes of llama.cpp's deepseek-llm rules, as code point
// ranges (the regex source lists them as literal characters).
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},
    {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x1BA},
    {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},
    {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},
    {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},
    {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},
    {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},
    {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},
    {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},
    {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},
    {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},
    {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},
    {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
constexpr Range kDeepseekPunct[] = {
    {0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// Overlapping ranges as in the source ("一-龥ࠀ-一가-퟿"), merged.
constexpr Range kDeepseekCjk[] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

template <size_t N>
bool InRanges(const Range (&ranges)[N], char32_t c) {
  const Range* it =
      std::upper_bound(ranges, ranges + N, c,
                       [](char32_t v, const Range& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->second;
}

// llama.cpp runs the deepseek classes through std::wregex after replacing
// every non-ASCII whitespace character with U+000B, so those never match a
// bracket class even when the class lists them (U+3000).
bool NotReplacedSpace(char32_t c) { return c < 128 || !IsUnicodeWhitespace(c); }

}  // namespace

bool IsDeepseekLetter(char32_t c) {
  return NotReplacedSpace(c) && InRanges(kDeepseekLetters, c);
}
bool IsDeepseekPunct(char32_t c) {
  return NotReplacedSpace(c) && InRanges(kDeepseekPunct, c);
}
bool IsDeepseekCjk(char32_t c) {
  return NotReplacedSpace(c) && InRanges(kDeepseekCjk, c);
}
bool IsCrOrLf(char32_t c) { return c == '\r' || c == '\n'; }

bool IsCollapsedLetter(char32_t c) {
  if (c < 128) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  return !IsUnicodeWhitespace(c) && IsUnicodeLetter(c);
}
bool IsCollapsedPunct(char32_t c) {
  if (c < 128) return std::strchr("!\"#%&'()*,-./:;?@[\\]_{}", c) && c != 0;
  return !IsUnicodeWhitespace(c) && IsUnicodePunctuation(c);
}
bool IsCollapsedNumber(char32_t c) {
  if (c < 128) return c >= '0' && c <= '9';
  return !IsUnicodeWhitespace(c) && IsUnicodeNumber(c);
}
// [\p{P}\$\+<=>\^~\|]
bool IsDefaultPunct(char32_t c) {
  return IsCollapsedPunct(c) ||
         (c != 0 && c < 128 && std::strchr("$+<=>^~|", c));
}
// [\p{P}\$\+<=>\^~\|`]
bool IsFalconPunct(char32_t c) { return c == '`' || IsDefaultPunct(c); }
bool IsAsciiDigit(char32_t c) { return c >= '0' && c <= '9'; }

}  // namespace kvault::pre_tokenizer_classes
