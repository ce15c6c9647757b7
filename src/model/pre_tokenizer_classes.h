// The character classes of llama.cpp's pre-tokenizer rules (PreTokenizer),
// as llama.cpp's regex engines see them: where it runs a rule through
// std::regex it first collapses every non-ASCII code point to one byte per
// Unicode category (whitespace first), so an ASCII class means the plain
// ASCII range and a category means ASCII by its own ranges and other code
// points by category unless whitespace ("collapsed" below); the deepseek
// bracket classes run through std::wregex after non-ASCII whitespace became
// U+000B.
#ifndef KVAULT_MODEL_PRE_TOKENIZER_CLASSES_H_
#define KVAULT_MODEL_PRE_TOKENIZER_CLASSES_H_

namespace kvault::pre_tokenizer_classes {

// deepseek-llm's letter bracket class (Latin, Greek, Cyrillic, ... ranges).
bool IsDeepseekLetter(char32_t c);
// deepseek-llm's punctuation bracket class: [!-/:-~ fullwidth, quotes, CJK].
bool IsDeepseekPunct(char32_t c);
// [一-龥ࠀ-一가-퟿] of deepseek-llm and deepseek-coder.
bool IsDeepseekCjk(char32_t c);
// [\r\n]
bool IsCrOrLf(char32_t c);
// \p{L}, collapsed.
bool IsCollapsedLetter(char32_t c);
// \p{P}, collapsed.
bool IsCollapsedPunct(char32_t c);
// \p{N}, collapsed.
bool IsCollapsedNumber(char32_t c);
// [\p{P}\$\+<=>\^~\|] (the default rules).
bool IsDefaultPunct(char32_t c);
// [\p{P}\$\+<=>\^~\|`] (falcon).
bool IsFalconPunct(char32_t c);
// [0-9]
bool IsAsciiDigit(char32_t c);

}  // namespace kvault::pre_tokenizer_classes

#endif  // KVAULT_MODEL_PRE_TOKENIZER_CLASSES_H_
