// GbnfParser: reads GBNF text (llama.cpp's notation) into a GrammarBuilder.
// Rules are `name ::= alternatives`, one per line; newlines are allowed
// after `::=`, after `|` and anywhere inside parentheses. Every error names
// its position and what was expected vs found.
#ifndef KVAULT_GRAMMAR_GBNF_PARSER_H_
#define KVAULT_GRAMMAR_GBNF_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "grammar/grammar_builder.h"

namespace kvault {

class GbnfParser {
 public:
  // Largest count allowed in `{m,n}`: a bound keeps expansion linear.
  static constexpr uint32_t kMaxRepetition = 10000;
  // Deepest nesting of parentheses (the parser is recursive).
  static constexpr int kMaxNesting = 200;

  // Parses `text` into `builder` (which then Finish()es the grammar).
  static Status Parse(std::string_view text, GrammarBuilder* builder);

 private:
  GbnfParser(std::string_view text, GrammarBuilder* builder)
      : text_(text), builder_(builder) {}

  Status ParseRule();
  Status ParseAlternatives(std::string_view rule, int depth,
                           std::vector<Alternative>* alts);
  Status ParseSequence(std::string_view rule, int depth, Alternative* out);
  Status ParseItem(std::string_view rule, int depth, Alternative* item);
  Status ParseGroup(std::string_view rule, int depth, Alternative* item);
  Status ParseLiteral(Alternative* item);
  Status ParseClass(Alternative* item);
  Status ParseEscape(uint32_t* cp);
  Status ParseCodePoint(uint32_t* cp);
  Status ParseRepeat(std::string_view rule, Alternative* item);
  Status ParseCount(uint32_t* n);
  Status Repeat(std::string_view rule, SourcePos at, uint32_t min, int64_t max,
                Alternative* item);

  void SkipSpace(bool newlines);
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  SourcePos PosAt(size_t offset) const;
  std::string Found() const;
  Status Error(size_t offset, const std::string& message) const;

  std::string_view text_;
  GrammarBuilder* builder_;
  size_t pos_ = 0;
  size_t expanded_ = 0;  // elements produced by repetitions so far
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_GBNF_PARSER_H_
