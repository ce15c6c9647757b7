#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <utility>

#include "grammar/utf8.h"

namespace kvault {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status GbnfParser::Parse(std::string_view text, GrammarBuilder* builder) {
  GbnfParser p(text, builder);
  p.SkipSpace(true);
  if (p.AtEnd()) {
    return InvalidArgumentError("grammar: the grammar is empty (no rules)");
  }
  while (!p.AtEnd()) {
    KV_RETURN_IF_ERROR(p.ParseRule());
    p.SkipSpace(true);
  }
  return Status::Ok();
}

SourcePos GbnfParser::PosAt(size_t offset) const {
  // Positions are asked for in increasing order while parsing, so resume
  // from the last answer: linear overall instead of quadratic.
  if (offset < pos_cache_offset_) {
    pos_cache_offset_ = 0;
    pos_cache_ = SourcePos{1, 1};
  }
  SourcePos p = pos_cache_;
  for (size_t i = pos_cache_offset_; i < offset && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
      ++p.column;  // columns count code points
    }
  }
  pos_cache_offset_ = std::min(offset, text_.size());
  pos_cache_ = p;
  return p;
}

std::string GbnfParser::Found() const {
  if (AtEnd()) return "end of input";
  const char c = Peek();
  if (c == '\n' || c == '\r') return "end of line";
  uint32_t cp;
  size_t len;
  if (DecodeUtf8(text_.substr(pos_), &cp, &len) && cp >= 0x20 && cp != 0x7F) {
    return "'" + std::string(text_.substr(pos_, len)) + "'";
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  const uint8_t b = static_cast<uint8_t>(c);
  return std::string("byte 0x") + kHex[b >> 4] + kHex[b & 15];
}

Status GbnfParser::Error(size_t offset, const std::string& message) const {
  return InvalidArgumentError(PosPrefix(PosAt(offset)) + message);
}

void GbnfParser::SkipSpace(bool newlines) {
  while (!AtEnd()) {
    const char c = Peek();
    if (c == ' ' || c == '\t') {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n') ++pos_;
    } else if (newlines && (c == '\n' || c == '\r')) {
      ++pos_;
    } else if (c == '\r' && pos_ + 1 < text_.size() &&
               text_[pos_ + 1] == '\n') {
      return;  // CRLF ends the line like LF does
    } else {
      return;
    }
  }
}

// PosAt is asked in source order (it resumes from its last answer), so
// positions are taken when the parser reaches them.
Status GbnfParser::ParseRule() {
  const size_t start = pos_;
  const SourcePos at = PosAt(start);
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  if (pos_ == start) {
    return Error(pos_, "expected a rule name, found " + Found());
  }
  const std::string_view name = text_.substr(start, pos_ - start);
  SkipSpace(false);
  if (text_.substr(pos_, 3) != "::=") {
    return Error(pos_, "expected '::=' after rule name '" + std::string(name) +
                           "', found " + Found());
  }
  pos_ += 3;
  SkipSpace(true);
  std::vector<Alternative> alts;
  KV_RETURN_IF_ERROR(ParseAlternatives(name, 0, &alts));
  if (!AtEnd() && Peek() != '\n' && Peek() != '\r') {
    return Error(pos_, "expected an element, '|' or end of line in rule '" +
                           std::string(name) + "', found " + Found());
  }
  return builder_->Define(builder_->RuleId(name, at), std::move(alts), at);
}

Status GbnfParser::ParseAlternatives(std::string_view rule, int depth,
                                     std::vector<Alternative>* alts) {
  while (true) {
    KV_RETURN_IF_ERROR(builder_->Poll());
    Alternative seq;
    KV_RETURN_IF_ERROR(ParseSequence(rule, depth, &seq));
    alts->push_back(std::move(seq));
    if (Peek() != '|') return Status::Ok();
    ++pos_;
    SkipSpace(true);
  }
}

Status GbnfParser::ParseSequence(std::string_view rule, int depth,
                                 Alternative* out) {
  const bool nested = depth > 0;
  while (true) {
    SkipSpace(nested);
    const char c = Peek();
    if (AtEnd() || !(c == '"' || c == '[' || c == '.' || c == '(' || c == '<' ||
                     IsNameChar(c))) {
      return Status::Ok();
    }
    Alternative item;
    KV_RETURN_IF_ERROR(ParseItem(rule, depth, &item));
    SkipSpace(nested);
    while (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{') {
      KV_RETURN_IF_ERROR(ParseRepeat(rule, &item));
      SkipSpace(nested);
    }
    out->insert(out->end(), item.begin(), item.end());
  }
}

Status GbnfParser::ParseItem(std::string_view rule, int depth,
                             Alternative* item) {
  const char c = Peek();
  if (c == '"') return ParseLiteral(item);
  if (c == '[') return ParseClass(item);
  if (c == '(') return ParseGroup(rule, depth, item);
  if (c == '.') {
    ++pos_;
    item->push_back(
        {ElementKind::kChar, builder_->AddClass(CharClass(true, {}))});
    return Status::Ok();
  }
  if (c == '<') {
    return Error(pos_,
                 "token references (<[id]> or <token>) are not "
                 "supported; use a string literal");
  }
  const size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  const std::string_view name = text_.substr(start, pos_ - start);
  SkipSpace(false);
  if (text_.substr(pos_, 3) == "::=") {
    return Error(start, "expected end of line before the definition of '" +
                            std::string(name) + "', found '" +
                            std::string(name) + " ::='");
  }
  item->push_back(
      {ElementKind::kRuleRef, builder_->RuleId(name, PosAt(start))});
  return Status::Ok();
}

Status GbnfParser::ParseGroup(std::string_view rule, int depth,
                              Alternative* item) {
  const size_t open = pos_++;
  const SourcePos o = PosAt(open);
  if (depth + 1 > kMaxNesting) {
    return Error(
        open, "parentheses nested deeper than " + std::to_string(kMaxNesting));
  }
  SkipSpace(true);
  std::vector<Alternative> alts;
  KV_RETURN_IF_ERROR(ParseAlternatives(rule, depth + 1, &alts));
  SkipSpace(true);
  if (Peek() != ')') {
    return Error(pos_, "expected ')' to close the group opened at " +
                           std::to_string(o.line) + ":" +
                           std::to_string(o.column) + ", found " + Found());
  }
  ++pos_;
  const uint32_t id = builder_->NewGenerated(rule, o);
  KV_RETURN_IF_ERROR(builder_->SetGenerated(id, std::move(alts)));
  item->push_back({ElementKind::kRuleRef, id});
  return Status::Ok();
}

Status GbnfParser::ParseCodePoint(uint32_t* cp) {
  if (Peek() == '\\') return ParseEscape(cp);
  size_t len = 0;
  if (!DecodeUtf8(text_.substr(pos_), cp, &len)) {
    return Error(pos_, "expected a UTF-8 character, found " + Found());
  }
  pos_ += len;
  return Status::Ok();
}

Status GbnfParser::ParseEscape(uint32_t* cp) {
  const size_t start = pos_++;  // the backslash
  const char c = Peek();
  int digits = 0;
  switch (c) {
    case 'n':
      *cp = '\n';
      break;
    case 'r':
      *cp = '\r';
      break;
    case 't':
      *cp = '\t';
      break;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
      *cp = c;
      break;
    case 'x':
      digits = 2;
      break;
    case 'u':
      digits = 4;
      break;
    case 'U':
      digits = 8;
      break;
    default:
      return Error(start,
                   "expected an escape (\\n \\r \\t \\\\ \\\" \\[ \\] "
                   "\\xHH \\uHHHH \\UHHHHHHHH), found '\\" +
                       std::string(AtEnd() ? "" : text_.substr(pos_, 1)) + "'");
  }
  ++pos_;
  if (digits == 0) return Status::Ok();
  uint64_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const int h = HexValue(Peek());
    if (h < 0) {
      return Error(pos_, "expected " + std::to_string(digits) +
                             " hex digits after '\\" + std::string(1, c) +
                             "', found " + Found());
    }
    value = value * 16 + static_cast<uint64_t>(h);
    ++pos_;
  }
  if (value > kMaxCodePoint) {
    return Error(start, "escape is above U+10FFFF");
  }
  *cp = static_cast<uint32_t>(value);
  return Status::Ok();
}

Status GbnfParser::ParseLiteral(Alternative* item) {
  const size_t open = pos_++;
  while (Peek() != '"') {
    if (AtEnd() || Peek() == '\n' || Peek() == '\r') {
      const SourcePos o = PosAt(open);
      return Error(pos_, "expected '\"' to close the string opened at " +
                             std::to_string(o.line) + ":" +
                             std::to_string(o.column) + ", found " + Found());
    }
    uint32_t cp;
    KV_RETURN_IF_ERROR(ParseCodePoint(&cp));
    item->push_back(
        {ElementKind::kChar, builder_->AddClass(CharClass(false, {{cp, cp}}))});
  }
  ++pos_;
  return Status::Ok();
}

Status GbnfParser::ParseClass(Alternative* item) {
  const size_t open = pos_++;
  const bool negated = Peek() == '^';
  if (negated) ++pos_;
  std::vector<CodeRange> ranges;
  while (Peek() != ']') {
    if (AtEnd() || Peek() == '\n' || Peek() == '\r') {
      const SourcePos o = PosAt(open);
      return Error(pos_,
                   "expected ']' to close the character class opened "
                   "at " +
                       std::to_string(o.line) + ":" + std::to_string(o.column) +
                       ", found " + Found());
    }
    const size_t at = pos_;
    uint32_t lo, hi;
    KV_RETURN_IF_ERROR(ParseCodePoint(&lo));
    hi = lo;
    if (Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
      ++pos_;
      KV_RETURN_IF_ERROR(ParseCodePoint(&hi));
      if (hi < lo) {
        return Error(at, "character range is reversed (end before start)");
      }
    }
    ranges.push_back({lo, hi});
  }
  ++pos_;
  item->push_back({ElementKind::kChar,
                   builder_->AddClass(CharClass(negated, std::move(ranges)))});
  return Status::Ok();
}

Status GbnfParser::ParseCount(uint32_t* n) {
  SkipSpace(true);
  const size_t start = pos_;
  uint64_t value = 0;
  while (Peek() >= '0' && Peek() <= '9') {
    value = value * 10 + static_cast<uint64_t>(Peek() - '0');
    if (value > kMaxRepetition) {
      while (Peek() >= '0' && Peek() <= '9') ++pos_;
      return Error(start, "repetition count " +
                              std::string(text_.substr(start, pos_ - start)) +
                              " exceeds the limit of " +
                              std::to_string(kMaxRepetition));
    }
    ++pos_;
  }
  if (pos_ == start) {
    return Error(pos_, "expected a repetition count, found " + Found());
  }
  *n = static_cast<uint32_t>(value);
  SkipSpace(true);
  return Status::Ok();
}

Status GbnfParser::ParseRepeat(std::string_view rule, Alternative* item) {
  const size_t op = pos_;
  const SourcePos at = PosAt(op);
  const char c = text_[pos_++];
  if (c == '*') return Repeat(rule, at, 0, -1, item);
  if (c == '+') return Repeat(rule, at, 1, -1, item);
  if (c == '?') return Repeat(rule, at, 0, 1, item);
  uint32_t min = 0;
  KV_RETURN_IF_ERROR(ParseCount(&min));
  int64_t max = min;
  if (Peek() == ',') {
    ++pos_;
    SkipSpace(true);
    max = -1;
    if (Peek() != '}') {
      uint32_t n = 0;
      KV_RETURN_IF_ERROR(ParseCount(&n));
      max = n;
    }
  }
  if (Peek() != '}') {
    return Error(pos_, "expected '}' to close the repetition opened at " +
                           std::to_string(at.line) + ":" +
                           std::to_string(at.column) + ", found " + Found());
  }
  ++pos_;
  if (max >= 0 && max < min) {
    return Error(op, "repetition {" + std::to_string(min) + "," +
                         std::to_string(max) + "} has max below min");
  }
  return Repeat(rule, at, min, max, item);
}

// Desugars item{min,max} (max -1: unbounded) into min copies followed by
// right-recursive generated rules; right recursion keeps matcher stacks flat.
Status GbnfParser::Repeat(std::string_view rule, SourcePos at, uint32_t min,
                          int64_t max, Alternative* item) {
  if (item->empty()) return Status::Ok();  // "" repeated is still ""
  Element unit = item->front();
  if (item->size() != 1) {
    const uint32_t id = builder_->NewGenerated(rule, at);
    KV_RETURN_IF_ERROR(builder_->SetGenerated(id, {*item}));
    unit = {ElementKind::kRuleRef, id};
  }
  Alternative out(min, unit);
  if (max < 0) {
    const uint32_t star = builder_->NewGenerated(rule, at);
    KV_RETURN_IF_ERROR(builder_->SetGenerated(
        star, {{unit, {ElementKind::kRuleRef, star}}, {}}));
    out.push_back({ElementKind::kRuleRef, star});
  } else if (max > min) {
    uint32_t tail = 0;
    for (int64_t i = 0; i < max - min; ++i) {
      const uint32_t opt = builder_->NewGenerated(rule, at);
      Alternative first{unit};
      if (i > 0) first.push_back({ElementKind::kRuleRef, tail});
      KV_RETURN_IF_ERROR(builder_->SetGenerated(opt, {first, {}}));
      tail = opt;
    }
    out.push_back({ElementKind::kRuleRef, tail});
  }
  // Copies made here are only counted when their rule is defined, so a
  // long line of repetitions is bounded here, before it is built.
  expanded_ += out.size();
  if (expanded_ > GrammarBuilder::kMaxElements) {
    return InvalidArgumentError(PosPrefix(at) +
                                "grammar too large: more than " +
                                std::to_string(GrammarBuilder::kMaxElements) +
                                " elements after expanding repetitions");
  }
  *item = std::move(out);
  return Status::Ok();
}

}  // namespace kvault
