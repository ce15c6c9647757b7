// UTF-8 encoding shared by the modules that write text from code points
// (tokenizers, the grammar matcher, the Jinja engine).
#ifndef KVAULT_CORE_UTF8_H_
#define KVAULT_CORE_UTF8_H_

#include <string>

namespace kvault {

// Appends the UTF-8 encoding of `cp` to `out`; a value above U+10FFFF is
// written as U+FFFD. Surrogates are encoded as three bytes, so lenient
// decoders round-trip them.
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace kvault

#endif  // KVAULT_CORE_UTF8_H_
