// Python str behaviour that templates call: strip/split/case mapping/
// padding, printf-style `%` and str.format. Text is UTF-8; indexes and
// widths count code points as Python does.
#ifndef KVAULT_JINJA_PYTHON_STR_H_
#define KVAULT_JINJA_PYTHON_STR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "jinja/value.h"

namespace kvault::jinja {

// str.strip/lstrip/rstrip; `chars` nullopt strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right);
// str.split (from the left) or str.rsplit; `sep` nullopt splits on runs of
// whitespace; maxsplit < 0 is unlimited. An empty `sep` is a ValueError.
StatusOr<std::vector<std::string>> PySplit(
    std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
    bool from_right);
// str.splitlines.
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
// Case mapping (ASCII, Latin-1, Greek and Cyrillic letters).
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);
std::string PySwapCase(std::string_view s);
// str.replace with Python's count (< 0: all); an empty `old` inserts `new`
// between code points.
std::string PyReplace(std::string_view s, std::string_view old,
                      std::string_view repl, int64_t count);
// Code point index of the first (or last) `sub`, or -1.
int64_t PyFind(std::string_view s, std::string_view sub, bool from_right);
// Non-overlapping occurrences of `sub`.
int64_t PyCount(std::string_view s, std::string_view sub);
// str.center/ljust/rjust to `width` code points with `fill`.
std::string PyPad(std::string_view s, int64_t width, char32_t fill, char align);
// Character class tests: "digit", "alpha", "alnum", "space", "upper",
// "lower", "title", "numeric", "decimal".
bool PyIsClass(std::string_view s, std::string_view cls);
// `fmt % args` (args: a tuple of values, a dict for %(name)s, or one value).
StatusOr<std::string> PercentFormat(std::string_view fmt, const Value& args);
// str.format with {} {0} {name} and simple specs (fill, align, width,
// precision, type).
StatusOr<std::string> BraceFormat(std::string_view fmt, const CallArgs& args);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_PYTHON_STR_H_
