#include "jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "jinja/utf8.h"

namespace kvault::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Jinja lexes the source after turning \r\n and \r into \n and dropping one
// final newline (keep_trailing_newline=False).
std::string Normalize(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') {
    out.pop_back();
  }
  return out;
}

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Returns the character a one-letter escape (\n, \t, ...) stands for, or
// -1 when `c` is not one.
int SimpleEscape(char c) {
  static constexpr std::pair<char, char> kEscapes[] = {
      {'\\', '\\'}, {'\'', '\''}, {'"', '"'},  {'a', '\a'}, {'b', '\b'},
      {'f', '\f'},  {'n', '\n'},  {'r', '\r'}, {'t', '\t'}, {'v', '\v'}};
  for (const auto& [from, to] : kEscapes) {
    if (from == c) return to;
  }
  return -1;
}

// Decodes \ooo, \xhh, \uhhhh or \Uhhhhhhhh whose letter is body[*i];
// leaves *i on the escape's last character. False when body[*i] starts no
// numeric escape; a syntax error when one is truncated (as in Python).
StatusOr<bool> NumericEscape(std::string_view body, size_t* i,
                             std::string* out) {
  const char c = body[*i];
  if (c >= '0' && c <= '7') {
    uint32_t v = 0;
    size_t n = 0;
    while (n < 3 && *i < body.size() && body[*i] >= '0' && body[*i] <= '7') {
      v = v * 8 + (body[(*i)++] - '0');
      ++n;
    }
    --*i;
    AppendUtf8(v, out);
    return true;
  }
  const size_t width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (c == 'N') {
    return JinjaError(ErrorKind::kSyntax, "\\N{...} escapes are not supported");
  }
  if (width == 0) return false;
  uint32_t v = 0;
  for (size_t k = 1; k <= width; ++k) {
    if (*i + k >= body.size() || HexValue(body[*i + k]) < 0) {
      return JinjaError(ErrorKind::kSyntax, std::string("truncated \\") + c +
                                                std::string(width, 'X') +
                                                " escape");
    }
    v = v * 16 + HexValue(body[*i + k]);
  }
  if (v > 0x10FFFF) {
    return JinjaError(ErrorKind::kSyntax, "illegal Unicode character");
  }
  AppendUtf8(v, out);
  *i += width;
  return true;
}

// Decodes Python string-literal escapes in `body` (the text between
// quotes); unknown escapes keep their backslash, as in Python.
StatusOr<std::string> DecodeEscapes(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char c = body[++i];
    if (c == '\n') continue;  // a line continuation
    if (const int simple = SimpleEscape(c); simple >= 0) {
      out.push_back(static_cast<char>(simple));
      continue;
    }
    KV_ASSIGN_OR_RETURN(bool numeric, NumericEscape(body, &i, &out));
    if (!numeric) {
      out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options)
      : src_(std::move(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      KV_RETURN_IF_ERROR(Step());
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = PosAt(src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  SourcePos PosAt(size_t offset) const {
    auto it =
        std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = it - line_starts_.begin();
    return SourcePos{static_cast<int>(line),
                     static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  Status Error(size_t offset, std::string message) const {
    return WithPosition(JinjaError(ErrorKind::kSyntax, std::move(message)),
                        PosAt(offset));
  }

  void Emit(TokenType type, std::string text, size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.pos = PosAt(offset);
    tokens_.push_back(std::move(t));
  }

  // Lexes the text up to the next tag and the tag itself.
  Status Step() {
    const size_t start = FindTagStart(pos_);
    std::string text = src_.substr(pos_, start - pos_);
    const size_t text_at = pos_;
    if (start >= src_.size()) {
      if (!text.empty()) Emit(TokenType::kText, std::move(text), text_at);
      pos_ = src_.size();
      return Status::Ok();
    }
    const char kind = src_[start + 1];  // '{', '%' or '#'
    const char mod = start + 2 < src_.size() ? src_[start + 2] : '\0';
    if (mod == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (mod != '+' && kind != '{' && options_.lstrip_blocks) {
      LStripLine(&text);
    }
    if (!text.empty()) Emit(TokenType::kText, std::move(text), text_at);
    pos_ = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
    if (kind == '#') return Comment(start);
    if (kind == '%' && TryRaw(start)) return raw_status_;
    Emit(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin,
         kind == '{' ? "{{" : "{%", start);
    return Tag(kind == '{', start);
  }

  size_t FindTagStart(size_t from) const {
    size_t at = from;
    while ((at = src_.find('{', at)) != std::string::npos) {
      if (at + 1 < src_.size() &&
          (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#')) {
        return at;
      }
      ++at;
    }
    return src_.size();
  }

  // lstrip_blocks: drop spaces and tabs between a line start and the tag.
  void LStripLine(std::string* text) const {
    const size_t nl = text->rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return;
    for (size_t i = l_pos; i < text->size(); ++i) {
      if ((*text)[i] != ' ' && (*text)[i] != '\t') return;
    }
    text->resize(l_pos);
  }

  // Applies the right-hand modifier of a tag that ends just before pos_.
  void AfterTagEnd(char mod, bool block_like) {
    if (mod == '-') {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    } else if (mod != '+' && block_like && options_.trim_blocks &&
               pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  Status Comment(size_t start) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) {
      return Error(start, "Missing end of comment tag");
    }
    const char mod = end > pos_ ? src_[end - 1] : '\0';
    pos_ = end + 2;
    AfterTagEnd(mod, /*block_like=*/true);
    return Status::Ok();
  }

  // Matches `{%[-+]? raw [-]?%}` at `start`; on a match consumes the raw
  // block up to its endraw and returns true (raw_status_ holds the result).
  bool TryRaw(size_t start) {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 ||
        (p + 3 < src_.size() && IsNameChar(src_[p + 3]))) {
      return false;
    }
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    bool strip_after = false;
    if (p < src_.size() && src_[p] == '-') {
      strip_after = true;
      ++p;
    }
    if (src_.compare(p, 2, "%}") != 0) return false;
    p += 2;
    if (strip_after) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
    }
    raw_status_ = RawBody(start, p);
    return true;
  }

  Status RawBody(size_t start, size_t body) {
    size_t at = body;
    while ((at = src_.find("{%", at)) != std::string::npos) {
      size_t p = at + 2;
      const char mod = p < src_.size() ? src_[p] : '\0';
      if (mod == '-' || mod == '+') ++p;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) {
        at += 2;
        continue;
      }
      p += 6;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      char end_mod = '\0';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
        end_mod = src_[p++];
      }
      if (src_.compare(p, 2, "%}") != 0) {
        at += 2;
        continue;
      }
      std::string text = src_.substr(body, at - body);
      if (mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      if (!text.empty()) Emit(TokenType::kText, std::move(text), body);
      pos_ = p + 2;
      AfterTagEnd(end_mod, /*block_like=*/true);
      return Status::Ok();
    }
    return Error(start, "Missing end of raw directive");
  }

  // Lexes the expression tokens of a {{ }} or {% %} tag.
  Status Tag(bool variable, size_t start) {
    // As in jinja2, `}}` or `%}` inside open brackets does not end the tag
    // ({'a': {}} is a dict).
    int open_brackets = 0;
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) {
        return Error(start, variable ? "unexpected end of template, expected "
                                       "end of print statement"
                                     : "unexpected end of template, expected "
                                       "end of block statement");
      }
      if (open_brackets == 0 && TryTagEnd(variable)) return Status::Ok();
      KV_RETURN_IF_ERROR(ExpressionToken());
      const Token& t = tokens_.back();
      if (t.type == TokenType::kOp && t.text.size() == 1) {
        const char c = t.text[0];
        if (c == '(' || c == '[' || c == '{') ++open_brackets;
        if ((c == ')' || c == ']' || c == '}') && open_brackets > 0) {
          --open_brackets;
        }
      }
    }
  }

  bool TryTagEnd(bool variable) {
    const char* close = variable ? "}}" : "%}";
    char mod = '\0';
    size_t p = pos_;
    if (src_[p] == '-' || (!variable && src_[p] == '+')) mod = src_[p++];
    if (src_.compare(p, 2, close) != 0) return false;
    Emit(variable ? TokenType::kVarEnd : TokenType::kBlockEnd, close, pos_);
    pos_ = p + 2;
    AfterTagEnd(mod, !variable);
    return true;
  }

  Status ExpressionToken() {
    const size_t at = pos_;
    const char c = src_[pos_];
    if (IsNameStart(c)) {
      while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
      Emit(TokenType::kName, src_.substr(at, pos_ - at), at);
      return Status::Ok();
    }
    if (IsDigit(c)) return Number();
    if (c == '\'' || c == '"') return StringLiteral();
    static constexpr std::string_view kOps[] = {
        "//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[",
        "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
    for (std::string_view op : kOps) {
      if (src_.compare(pos_, op.size(), op) == 0) {
        pos_ += op.size();
        Emit(TokenType::kOp, std::string(op), at);
        return Status::Ok();
      }
    }
    return Error(at, std::string("unexpected char '") + c + "'");
  }

  Status Number() {
    const size_t at = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (IsDigit(src_[pos_]) ||
              (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
               IsDigit(src_[pos_ + 1])))) {
        ++pos_;
      }
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        IsDigit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigit(src_[p])) {
        is_float = true;
        pos_ = p;
        digits();
      }
    }
    std::string text = src_.substr(at, pos_ - at);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Emit(is_float ? TokenType::kFloat : TokenType::kInt, text, at);
    if (is_float) {
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
      return Status::Ok();
    }
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return Error(at, "integer literal too large");
    tokens_.back().int_value = v;
    return Status::Ok();
  }

  Status StringLiteral() {
    const size_t at = pos_;
    const char quote = src_[pos_++];
    while (pos_ < src_.size() && src_[pos_] != quote) {
      pos_ += src_[pos_] == '\\' ? 2 : 1;
    }
    if (pos_ >= src_.size()) return Error(at, "unexpected end of string");
    std::string body = src_.substr(at + 1, pos_ - at - 1);
    ++pos_;
    StatusOr<std::string> text = DecodeEscapes(body);
    if (!text.ok()) {
      return WithPosition(text.status(), PosAt(at));
    }
    Emit(TokenType::kString, *std::move(text), at);
    return Status::Ok();
  }

  std::string src_;
  LexerOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  Status raw_status_;
};

}  // namespace

StatusOr<std::vector<Token>> Tokenize(std::string_view source,
                                      const LexerOptions& options) {
  Lexer lexer(Normalize(source, options.keep_trailing_newline), options);
  return lexer.Run();
}

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case TokenType::kText:
      return "template data";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return "'" + token.text + "'";
    case TokenType::kString:
      return "string";
    case TokenType::kInt:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOp:
      return "'" + token.text + "'";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace kvault::jinja
