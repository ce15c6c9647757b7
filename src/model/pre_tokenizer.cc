#include "model/pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "model/pre_tokenizer_classes.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

using pre_tokenizer_classes::IsAsciiDigit;
using pre_tokenizer_classes::IsCollapsedLetter;
using pre_tokenizer_classes::IsCollapsedNumber;
using pre_tokenizer_classes::IsCollapsedPunct;
using pre_tokenizer_classes::IsCrOrLf;
using pre_tokenizer_classes::IsDeepseekCjk;
using pre_tokenizer_classes::IsDeepseekLetter;
using pre_tokenizer_classes::IsDeepseekPunct;
using pre_tokenizer_classes::IsDefaultPunct;
using pre_tokenizer_classes::IsFalconPunct;

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

// Tekken's cased-letter classes, ((?=\p{L})[^a-z]) and ((?=\p{L})[^A-Z]),
// as llama.cpp's collapsed std::regex sees them: every non-ASCII letter is
// one category byte, so it is both "upper" and "lower".
bool IsTekkenUpper(const Piece& p, size_t pos) {
  return p.Class(pos).letter && !(p.At(pos) >= 'a' && p.At(pos) <= 'z');
}
bool IsTekkenLower(const Piece& p, size_t pos) {
  return p.Class(pos).letter && !(p.At(pos) >= 'A' && p.At(pos) <= 'Z');
}

// [^\r\n\p{L}\p{N}]?U*L+ | [^\r\n\p{L}\p{N}]?U+L* at pos, U and L the
// classes above; returns the end of the match, or pos when neither matches.
// The first alternative backtracks its greedy U* to the longest upper run
// that a lower letter follows; it fails only when the run holds ASCII
// capitals alone, which the second then takes.
size_t TekkenWordEnd(const Piece& p, size_t pos) {
  const CpClass f = p.Class(pos);
  const size_t s =
      pos + (f.in_piece && !f.letter && !f.number && !IsCrOrLf(p.At(pos)));
  if (!p.Class(s).letter) return pos;
  size_t upper_end = s;
  while (IsTekkenUpper(p, upper_end)) ++upper_end;
  for (size_t k = upper_end + 1; k-- > s;) {
    if (!IsTekkenLower(p, k)) continue;
    while (IsTekkenLower(p, k)) ++k;
    return k;
  }
  return upper_end;
}

// Tekken's other alternatives at pos:
// \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t TekkenOtherEnd(const Piece& p, size_t pos) {
  const char32_t c = p.At(pos);
  if (p.Class(pos).number) return pos + 1;
  if (!IsOther(p.Class(c == ' ' ? pos + 1 : pos))) {
    return WhitespaceEnd(p, pos, /*with_newlines=*/true);
  }
  size_t end = pos + (c == ' ');
  while (IsOther(p.Class(end))) ++end;
  while (IsCrOrLf(p.At(end)) || p.At(end) == '/') ++end;
  return end;
}

// Mistral's tekken rule: a word if one starts at pos, else the rest.
void SplitTekken(Piece& p) {
  for (size_t pos = p.begin(); pos < p.end();) {
    size_t end = TekkenWordEnd(p, pos);
    if (end == pos) end = TekkenOtherEnd(p, pos);
    p.CutAt(pos = end);
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
  kTekken,
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
    case RuleKind::kTekken:
      return SplitTekken(p);
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
    case PreTokenizerType::kDeepseekCoder:
      return {{RuleKind::kEach, IsCrOrLf},
              {RuleKind::kOptionalSpaceRuns, IsCollapsedLetter},
              {RuleKind::kOptionalSpaceRuns, IsCollapsedPunct},
              {RuleKind::kRuns, IsDeepseekCjk},
              {RuleKind::kEach, IsCollapsedNumber}};
    case PreTokenizerType::kTekken:
      return {{RuleKind::kTekken}};
    case PreTokenizerType::kDefault:
      break;
  }
  return {{RuleKind::kRuns, IsDefaultPunct},
          gpt2,
          {RuleKind::kRuns, IsCollapsedNumber},
          {RuleKind::kThreeDigits}};
}

}  // namespace

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
