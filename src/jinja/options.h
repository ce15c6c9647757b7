// Options of parsing and rendering, including the limits that keep hostile
// templates bounded in time, memory and stack.
#ifndef KVAULT_JINJA_OPTIONS_H_
#define KVAULT_JINJA_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>

namespace kvault::jinja {

struct ParseOptions {
  // jinja2 Environment settings; the defaults are what transformers uses.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
  // Largest template source accepted.
  size_t max_source_bytes = size_t{4} << 20;
  // Deepest nesting of blocks and parenthesised expressions.
  int max_depth = 256;
};

struct RenderOptions {
  // Largest output, and largest string or repr built on the way.
  size_t max_output_bytes = size_t{16} << 20;
  // Budget of evaluation steps (expressions, statements, loop iterations and
  // items of built containers); exceeding it fails the render.
  uint64_t max_operations = 10'000'000;
  // Most container items built in one render (lists, tuples, dict
  // entries, the pieces of a split): bounds a render's memory (a value is
  // ~100 bytes, so about 100 MiB) whatever the operation budget allows.
  uint64_t max_items = 1'000'000;
  // Deepest evaluation nesting, macro recursion included.
  int max_depth = 256;
  // The wall-clock time strftime_now formats (a broken-down local time).
  // Unset: the system clock's local time. Set it to pin the clock, e.g. from
  // KVAULT_FAKE_NOW.
  std::function<std::tm()> now;
};

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_OPTIONS_H_
