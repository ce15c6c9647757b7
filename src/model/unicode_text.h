// UTF-8 decoding/encoding that never reads past the end of its input, and the
// Unicode character classes the tokenizers need (general category groups and
// the White_Space property, from ICU's copy of the Unicode Character
// Database).
//
// Two decoders exist on purpose: DecodeUtf8At is strict (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF) and tells a truncated
// sequence apart from an invalid one, which the streaming detokenizer needs;
// DecodeUtf8Lenient reproduces llama.cpp's decoder, which the byte-level BPE
// pre-tokenizers must follow byte for byte to produce the same tokens.
#ifndef KVAULT_MODEL_UNICODE_TEXT_H_
#define KVAULT_MODEL_UNICODE_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace kvault {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Returns the length a UTF-8 lead byte announces judged by its high nibble
// alone: 1 for 0x00-0xBF (ASCII and stray continuation bytes), 2 for
// 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF. SentencePiece-style splitting
// uses this rule (callers clip it to the bytes left).
size_t Utf8LeadLength(uint8_t lead);

enum class Utf8Step {
  kValid,       // a complete well-formed sequence
  kIncomplete,  // the text ends inside an otherwise well-formed sequence
  kInvalid,     // the byte at the position cannot start a well-formed one
};

struct Utf8Decoded {
  Utf8Step step = Utf8Step::kInvalid;
  char32_t code_point = kReplacementChar;  // meaningful for kValid only
  size_t num_bytes = 1;  // kValid: sequence length; kIncomplete: bytes
                         // present; kInvalid: 1
};

// Strictly decodes the sequence starting at text[pos]; precondition:
// pos < text.size(). Never reads past text.end().
Utf8Decoded DecodeUtf8At(std::string_view text, size_t pos);

// Decodes like llama.cpp's unicode_cpts_from_utf8: lead and continuation
// bytes are checked by their top bits only (overlongs and surrogates pass),
// a byte that starts no such sequence becomes U+FFFD and decoding resumes at
// the next byte. A value above U+10FFFF (where llama.cpp throws) also becomes
// U+FFFD for its lead byte.
std::vector<char32_t> DecodeUtf8Lenient(std::string_view text);

// Returns the UTF-8 encoding of `cp` (core/utf8.h's AppendUtf8).
std::string EncodeUtf8(char32_t cp);

// Returns true when `text` is entirely well-formed UTF-8.
bool IsValidUtf8(std::string_view text);
// Returns `text` with each invalid byte and each truncated sequence replaced
// by U+FFFD; valid text is returned unchanged.
std::string SanitizeUtf8(std::string_view text);

// Unicode general category groups (the first letter of the category).
enum class CharCategory : uint8_t {
  kUnassigned,   // Cn, and values above U+10FFFF
  kLetter,       // L*
  kMark,         // M*
  kNumber,       // N*
  kPunctuation,  // P*
  kSymbol,       // S*
  kSeparator,    // Z*
  kControl,      // Cc, Cf, Cs, Co
};

// Returns the general category group of `cp`.
CharCategory GetCharCategory(char32_t cp);
// Returns true when `cp` has the Unicode White_Space property (U+0009-000D,
// U+0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028/9, U+202F, U+205F,
// U+3000).
bool IsUnicodeWhitespace(char32_t cp);
// Shorthands for GetCharCategory(cp) == kLetter / kNumber / kPunctuation.
bool IsUnicodeLetter(char32_t cp);
bool IsUnicodeNumber(char32_t cp);
bool IsUnicodePunctuation(char32_t cp);

}  // namespace kvault

#endif  // KVAULT_MODEL_UNICODE_TEXT_H_
