#include "model/unicode_text.h"

#include <unicode/uchar.h>

#include <array>

namespace kvault {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Maps an ICU general category to its group.
CharCategory GroupOf(int8_t icu_type) {
  const uint32_t mask = U_MASK(icu_type);
  if (mask & U_GC_L_MASK) return CharCategory::kLetter;
  if (mask & U_GC_M_MASK) return CharCategory::kMark;
  if (mask & U_GC_N_MASK) return CharCategory::kNumber;
  if (mask & U_GC_P_MASK) return CharCategory::kPunctuation;
  if (mask & U_GC_S_MASK) return CharCategory::kSymbol;
  if (mask & U_GC_Z_MASK) return CharCategory::kSeparator;
  if (mask & U_GC_CN_MASK) return CharCategory::kUnassigned;
  return CharCategory::kControl;  // Cc, Cf, Cs, Co
}

// ASCII is looked up on every character of typical text; a table avoids the
// ICU call there.
const std::array<CharCategory, 128>& AsciiCategories() {
  static const std::array<CharCategory, 128> table = [] {
    std::array<CharCategory, 128> t{};
    for (UChar32 c = 0; c < 128; ++c) t[c] = GroupOf(u_charType(c));
    return t;
  }();
  return table;
}

}  // namespace

size_t Utf8LeadLength(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

Utf8Decoded DecodeUtf8At(std::string_view text, size_t pos) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) return {Utf8Step::kValid, b0, 1};
  size_t need;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07;
  } else {
    return {};
  }
  for (size_t i = 1; i <= need; ++i) {
    if (pos + i >= text.size()) {
      return {Utf8Step::kIncomplete, kReplacementChar, i};
    }
    const auto b = static_cast<uint8_t>(text[pos + i]);
    // The second byte's range excludes overlongs (E0, F0), surrogates (ED)
    // and values above U+10FFFF (F4): RFC 3629's table.
    uint8_t lo = 0x80, hi = 0xBF;
    if (i == 1) {
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Step::kValid, cp, need + 1};
}

std::vector<char32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto b0 = static_cast<uint8_t>(text[pos]);
    size_t len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07;
    }
    bool ok = len > 0 && pos + len <= text.size();
    for (size_t i = 1; ok && i < len; ++i) {
      const auto b = static_cast<uint8_t>(text[pos + i]);
      ok = IsContinuation(b);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (!ok || cp > kMaxCodePoint) {
      out.push_back(kReplacementChar);
      ++pos;
      continue;
    }
    out.push_back(cp);
    pos += len;
  }
  return out;
}

std::string EncodeUtf8(char32_t cp) {
  std::string out;
  AppendUtf8(cp, &out);
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Decoded d = DecodeUtf8At(text, pos);
    if (d.step != Utf8Step::kValid) return false;
    pos += d.num_bytes;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Decoded d = DecodeUtf8At(text, pos);
    if (d.step == Utf8Step::kValid) {
      out.append(text.substr(pos, d.num_bytes));
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += d.num_bytes;  // a truncated tail is replaced once, as a whole
  }
  return out;
}

CharCategory GetCharCategory(char32_t cp) {
  if (cp < 128) return AsciiCategories()[cp];
  if (cp > kMaxCodePoint) return CharCategory::kUnassigned;
  return GroupOf(u_charType(static_cast<UChar32>(cp)));
}

bool IsUnicodeWhitespace(char32_t cp) {
  if (cp < 128) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  if (cp > kMaxCodePoint) return false;
  return u_isUWhiteSpace(static_cast<UChar32>(cp));
}

bool IsUnicodeLetter(char32_t cp) {
  return GetCharCategory(cp) == CharCategory::kLetter;
}

bool IsUnicodeNumber(char32_t cp) {
  return GetCharCategory(cp) == CharCategory::kNumber;
}

bool IsUnicodePunctuation(char32_t cp) {
  return GetCharCategory(cp) == CharCategory::kPunctuation;
}

}  // namespace kvault
