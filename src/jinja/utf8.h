// UTF-8 <-> code points. Python strings index by code point, so slicing,
// len() and centring need them. Invalid bytes decode to U+DC80..U+DCFF
// (Python's surrogateescape) and encode back to the same byte: lossless.
#ifndef KVAULT_JINJA_UTF8_H_
#define KVAULT_JINJA_UTF8_H_

#include <string>
#include <string_view>
#include <vector>

namespace kvault::jinja {

// Returns the code points of `s`.
std::u32string DecodeUtf8(std::string_view s);

// Appends `cp` to `out` as UTF-8 (surrogate escapes become their byte).
void AppendUtf8(char32_t cp, std::string* out);

// Returns `s` encoded as UTF-8.
std::string EncodeUtf8(std::u32string_view s);

// Returns the number of code points in `s`.
size_t Utf8Length(std::string_view s);

// True when `s` is pure ASCII (byte indexing equals code point indexing).
bool IsAscii(std::string_view s);

// Python's str.isspace() for one code point.
bool IsPySpace(char32_t c);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_UTF8_H_
