// UTF-8 helpers shared by the GBNF parser and the matcher.
#ifndef KVAULT_GRAMMAR_UTF8_H_
#define KVAULT_GRAMMAR_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace kvault {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Returns the total length of the UTF-8 sequence that starts with `lead`
// (1-4), or 0 when `lead` cannot start a sequence (continuation byte,
// 0xC0/0xC1, 0xF5 and above).
int Utf8SequenceLength(uint8_t lead);

// Decodes one code point from the front of `text`; sets `*length` to the
// bytes consumed. Returns false on a truncated, overlong or invalid
// sequence (surrogates and values above U+10FFFF included).
bool DecodeUtf8(std::string_view text, uint32_t* cp, size_t* length);

// (AppendUtf8, the encoder, is core/utf8.h's.)

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_UTF8_H_
