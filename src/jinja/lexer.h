// Lexer: template source -> tokens. Applies jinja2's whitespace control
// (trim_blocks, lstrip_blocks, the -/+ tag modifiers, dropping one trailing
// newline) while splitting, so the parser only sees final text.
#ifndef KVAULT_JINJA_LEXER_H_
#define KVAULT_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"
#include "jinja/error.h"

namespace kvault::jinja {

enum class TokenType {
  kText,        // literal template data
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOp,  // operator or punctuation; `text` holds it
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // text, name, decoded string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Returns the tokens of `source` ending with kEof, or a syntax error with
// its line and column.
StatusOr<std::vector<Token>> Tokenize(std::string_view source,
                                      const LexerOptions& options);

// Returns the name of a token for "expected X, found Y" messages.
std::string DescribeToken(const Token& token);

}  // namespace kvault::jinja

#endif  // KVAULT_JINJA_LEXER_H_
