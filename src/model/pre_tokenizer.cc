#include "model/pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "model/unicode_text.h"

namespace kvault {
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

// \p{P} and \p{N} as llama.cpp's collapsed std::regex sees them: ASCII by
// its own ranges, other code points by category unless whitespace.
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

// The flags llama.cpp's hand-written gpt2/llama3 splitters test.
struct CpClass {
  bool in_piece = false;  // false past the piece's end
  bool letter = false;
  bool number = false;
  bool space = false;
};

// Neither whitespace, letter nor number: the [^\s\p{L}\p{N}] class.
bool IsOther(const CpClass& f) {
  return f.in_piece && !(f.space || f.letter || f.number);
}

// One piece [begin, end) of the code points being split; collects the
// lengths of the words cut from it.
class Piece {
 public:
  Piece(std::span<const char32_t> cpts, size_t begin, size_t end,
        std::vector<size_t>* out)
      : cpts_(cpts), begin_(begin), end_(end), prev_(begin), out_(out) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  // Returns the code point at `pos`, or 0xFFFFFFFF past the end.
  char32_t At(size_t pos) const { return pos < end_ ? cpts_[pos] : ~0u; }
  CpClass Class(size_t pos) const {
    if (pos >= end_) return {};
    const char32_t c = cpts_[pos];
    const CharCategory cat = GetCharCategory(c);
    return {true, cat == CharCategory::kLetter, cat == CharCategory::kNumber,
            IsUnicodeWhitespace(c)};
  }
  // Ends the current word at `end` (no-op when empty).
  void CutAt(size_t end) {
    if (end > prev_) out_->push_back(end - prev_);
    prev_ = end;
  }

 private:
  std::span<const char32_t> cpts_;
  size_t begin_, end_, prev_;
  std::vector<size_t>* out_;
};

// 's|'t|'re|'ve|'m|'ll|'d (ASCII case-insensitive when fold_case): returns
// the match length at pos, or 0.
size_t ContractionLength(const Piece& p, size_t pos, bool fold_case) {
  if (p.At(pos) != '\'' || pos + 1 >= p.end()) return 0;
  auto lower = [fold_case](char32_t c) {
    return fold_case && c >= 'A' && c <= 'Z' ? c + 32 : c;
  };
  const char32_t c1 = lower(p.At(pos + 1));
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= p.end()) return 0;
  const char32_t c2 = lower(p.At(pos + 2));
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
      (c1 == 'l' && c2 == 'l')) {
    return 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ at pos (with \s*[\r\n]+ first when with_newlines); returns
// the end of the match (pos + 1 when nothing matches).
size_t WhitespaceEnd(const Piece& p, size_t pos, bool with_newlines) {
  size_t n = 0;
  size_t newline_end = 0;
  while (p.Class(pos + n).space) {
    if (IsCrOrLf(p.At(pos + n))) newline_end = pos + n + 1;
    ++n;
  }
  if (with_newlines && newline_end > 0) return newline_end;
  // Leave the last space of a run to prefix the next word.
  if (n > 1 && pos + n < p.end()) return pos + n - 1;
  return pos + std::max<size_t>(n, 1);
}

void SplitGpt2(Piece& p) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    const char32_t c = p.At(pos);
    if (size_t n = ContractionLength(p, pos, /*fold_case=*/false)) {
      p.CutAt(pos += n);
      continue;
    }
    const CpClass f2 = p.Class(c == ' ' ? pos + 1 : pos);
    if (f2.letter || f2.number) {  //  ?\p{L}+ |  ?\p{N}+
      pos += (c == ' ');
      while (f2.letter ? p.Class(pos).letter : p.Class(pos).number) ++pos;
      p.CutAt(pos);
      continue;
    }
    if (IsOther(f2)) {  //  ?[^\s\p{L}\p{N}]+
      pos += (c == ' ');
      while (IsOther(p.Class(pos))) ++pos;
      p.CutAt(pos);
      continue;
    }
    p.CutAt(pos = WhitespaceEnd(p, pos, /*with_newlines=*/false));
  }
}

void SplitLlama3(Piece& p, size_t max_digits) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    const char32_t c = p.At(pos);
    const CpClass f = p.Class(pos);
    if (size_t n = ContractionLength(p, pos, /*fold_case=*/true)) {
      p.CutAt(pos += n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!IsCrOrLf(c) && !f.number && (f.letter || p.Class(pos + 1).letter)) {
      ++pos;
      while (p.Class(pos).letter) ++pos;
      p.CutAt(pos);
      continue;
    }
    if (f.number) {  // \p{N}{1,max_digits}, repeated
      size_t start = pos;
      while (p.Class(pos).number) {
        if (++pos - start >= max_digits) p.CutAt(start = pos);
      }
      p.CutAt(pos);
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*  — a lone trailing space also lands here,
    // as in llama.cpp; it becomes the same one-space word either way.
    const CpClass f2 = p.Class(c == ' ' ? pos + 1 : pos);
    if (!(f2.space || f2.letter || f2.number)) {
      pos += (c == ' ');
      while (IsOther(p.Class(pos))) ++pos;
      while (IsCrOrLf(p.At(pos))) ++pos;
      p.CutAt(pos);
      continue;
    }
    p.CutAt(pos = WhitespaceEnd(p, pos, /*with_newlines=*/true));
  }
}

using CodePointPredicate = bool (*)(char32_t);

// [class]+ : every maximal run becomes a word.
void SplitRuns(Piece& p, CodePointPredicate in_class) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    if (!in_class(p.At(pos))) {
      ++pos;
      continue;
    }
    p.CutAt(pos);
    while (pos < p.end() && in_class(p.At(pos))) ++pos;
    p.CutAt(pos);
  }
}

// [class] : every member becomes a word of its own.
void SplitEach(Piece& p, CodePointPredicate in_class) {
  for (size_t pos = p.begin(); pos < p.end(); ++pos) {
    if (!in_class(p.At(pos))) continue;
    p.CutAt(pos);
    p.CutAt(pos + 1);
  }
}

// \s?[class]+
void SplitOptionalSpaceRuns(Piece& p, CodePointPredicate in_class) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    const size_t start = pos;
    if (IsUnicodeWhitespace(p.At(pos)) && pos + 1 < p.end() &&
        in_class(p.At(pos + 1))) {
      ++pos;
    } else if (!in_class(p.At(pos))) {
      ++pos;
      continue;
    }
    while (pos < p.end() && in_class(p.At(pos))) ++pos;
    p.CutAt(start);
    p.CutAt(pos);
  }
}

// \s+$ : the piece's trailing whitespace becomes a word.
void SplitTrailingSpace(Piece& p) {
  size_t start = p.end();
  while (start > p.begin() && IsUnicodeWhitespace(p.At(start - 1))) --start;
  p.CutAt(start);
}

// [0-9][0-9][0-9]
void SplitThreeDigits(Piece& p) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    if (pos + 3 <= p.end() && IsAsciiDigit(p.At(pos)) &&
        IsAsciiDigit(p.At(pos + 1)) && IsAsciiDigit(p.At(pos + 2))) {
      p.CutAt(pos);
      p.CutAt(pos += 3);
    } else {
      ++pos;
    }
  }
}

enum class RuleKind {
  kGpt2,
  kLlama3,
  kRuns,
  kEach,
  kOptionalSpaceRuns,
  kTrailingSpace,
  kThreeDigits,
};

struct Rule {
  RuleKind kind;
  CodePointPredicate in_class = nullptr;
  size_t max_digits = 3;
};

void ApplyRule(const Rule& rule, Piece& p) {
  switch (rule.kind) {
    case RuleKind::kGpt2:
      return SplitGpt2(p);
    case RuleKind::kLlama3:
      return SplitLlama3(p, rule.max_digits);
    case RuleKind::kRuns:
      return SplitRuns(p, rule.in_class);
    case RuleKind::kEach:
      return SplitEach(p, rule.in_class);
    case RuleKind::kOptionalSpaceRuns:
      return SplitOptionalSpaceRuns(p, rule.in_class);
    case RuleKind::kTrailingSpace:
      return SplitTrailingSpace(p);
    case RuleKind::kThreeDigits:
      return SplitThreeDigits(p);
  }
}

std::vector<Rule> RulesFor(PreTokenizerType type) {
  const Rule gpt2{RuleKind::kGpt2};
  switch (type) {
    case PreTokenizerType::kGpt2:
      return {gpt2};
    case PreTokenizerType::kLlama3:
      return {{RuleKind::kLlama3, nullptr, 3}};
    case PreTokenizerType::kQwen2:
      return {{RuleKind::kLlama3, nullptr, 1}};
    case PreTokenizerType::kStarcoder:
      return {{RuleKind::kEach, IsCollapsedNumber}, gpt2};
    case PreTokenizerType::kFalcon:
      return {{RuleKind::kRuns, IsFalconPunct}, gpt2, {RuleKind::kThreeDigits}};
    case PreTokenizerType::kDeepseekLlm:
      return {{RuleKind::kEach, IsCrOrLf},
              {RuleKind::kOptionalSpaceRuns, IsDeepseekLetter},
              {RuleKind::kOptionalSpaceRuns, IsDeepseekPunct},
              {RuleKind::kTrailingSpace},
              {RuleKind::kRuns, IsDeepseekCjk},
              {RuleKind::kRuns, IsCollapsedNumber}};
    case PreTokenizerType::kDefault:
      break;
  }
  return {{RuleKind::kRuns, IsDefaultPunct},
          gpt2,
          {RuleKind::kRuns, IsCollapsedNumber},
          {RuleKind::kThreeDigits}};
}

struct PreName {
  std::string_view name;
  PreTokenizerInfo info;
};

// llama.cpp's names for the rule sets implemented here, with the flags its
// vocabulary loader sets for each name.
constexpr PreName kPreNames[] = {
    {"default", {PreTokenizerType::kDefault, false, false}},
    {"llama3", {PreTokenizerType::kLlama3, true, true}},
    {"llama-v3", {PreTokenizerType::kLlama3, true, true}},
    {"llama-bpe", {PreTokenizerType::kLlama3, true, true}},
    {"falcon3", {PreTokenizerType::kLlama3, true, true}},
    {"dbrx", {PreTokenizerType::kLlama3, false, false}},
    {"smaug-bpe", {PreTokenizerType::kLlama3, false, false}},
    {"qwen2", {PreTokenizerType::kQwen2, false, false}},
    {"deepseek-r1-qwen", {PreTokenizerType::kQwen2, false, false}},
    {"stablelm2", {PreTokenizerType::kQwen2, false, false}},
    {"megrez", {PreTokenizerType::kQwen2, false, false}},
    {"gpt-2", {PreTokenizerType::kGpt2, false, false}},
    {"gpt2", {PreTokenizerType::kGpt2, false, false}},
    {"phi-2", {PreTokenizerType::kGpt2, false, false}},
    {"mpt", {PreTokenizerType::kGpt2, false, false}},
    {"olmo", {PreTokenizerType::kGpt2, false, false}},
    {"jais", {PreTokenizerType::kGpt2, false, false}},
    {"starcoder", {PreTokenizerType::kStarcoder, false, false}},
    {"refact", {PreTokenizerType::kStarcoder, false, false}},
    {"command-r", {PreTokenizerType::kStarcoder, false, false}},
    {"smollm", {PreTokenizerType::kStarcoder, false, false}},
    {"codeshell", {PreTokenizerType::kStarcoder, false, false}},
    {"deepseek-llm", {PreTokenizerType::kDeepseekLlm, false, false}},
    {"falcon", {PreTokenizerType::kFalcon, false, false}},
};

}  // namespace

StatusOr<PreTokenizerInfo> LookupPreTokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const PreName& entry : kPreNames) {
    if (entry.name == name) return entry.info;
  }
  return InvalidArgumentError("unknown pre-tokenizer '" + std::string(name) +
                              "' (tokenizer.ggml.pre); kvault implements "
                              "default, gpt-2, llama3/llama-bpe, qwen2, "
                              "starcoder, refact, mpt, deepseek-llm, falcon "
                              "and their aliases");
}

std::string_view PreTokenizerTypeName(PreTokenizerType type) {
  switch (type) {
    case PreTokenizerType::kDefault:
      return "default";
    case PreTokenizerType::kGpt2:
      return "gpt2";
    case PreTokenizerType::kLlama3:
      return "llama3";
    case PreTokenizerType::kQwen2:
      return "qwen2";
    case PreTokenizerType::kStarcoder:
      return "starcoder";
    case PreTokenizerType::kDeepseekLlm:
      return "deepseek-llm";
    case PreTokenizerType::kFalcon:
      return "falcon";
  }
  return "?";
}

std::vector<size_t> PreTokenizer::SplitCodePoints(
    std::span<const char32_t> cpts) const {
  std::vector<size_t> lengths;
  if (cpts.empty()) return lengths;
  lengths.push_back(cpts.size());
  for (const Rule& rule : RulesFor(type_)) {
    std::vector<size_t> next;
    next.reserve(lengths.size());
    size_t start = 0;
    for (size_t len : lengths) {
      Piece piece(cpts, start, start + len, &next);
      ApplyRule(rule, piece);
      piece.CutAt(piece.end());  // the text after the last match
      start += len;
    }
    lengths.swap(next);
  }
  return lengths;
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  const std::vector<char32_t> cpts = DecodeUtf8Lenient(text);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t len : SplitCodePoints(cpts)) {
    std::string& word = words.emplace_back();
    for (size_t i = start; i < start + len; ++i) AppendUtf8(cpts[i], &word);
    start += len;
  }
  return words;
}

}  // namespace kvault
