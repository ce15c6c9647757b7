// Grammar: a compiled GBNF grammar. Every rule is a list of alternatives,
// every alternative a run of elements (a character class or a reference to
// a rule) terminated by kEnd, all stored in one flat array so that a parse
// position is a single index. Groups and repetitions of the source are
// desugared into generated rules (named "<rule>_<n>"). Grammars that a
// stack-based matcher cannot run (left recursion) are refused when built.
#ifndef KVAULT_GRAMMAR_GRAMMAR_H_
#define KVAULT_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/interrupt.h"
#include "core/status_or.h"
#include "grammar/char_class.h"

namespace kvault {

enum class ElementKind : uint8_t {
  kEnd,      // end of an alternative
  kRuleRef,  // arg: rule id
  kChar,     // arg: char class id
};

struct Element {
  ElementKind kind;
  uint32_t arg;
};

class Grammar {
 public:
  // Parses and compiles GBNF text whose start rule is `root`. Errors are
  // InvalidArgument "grammar:LINE:COL: expected X, found Y" (or naming the
  // undefined rule, the missing root, the left-recursive cycle, the limit),
  // with reason "invalid_grammar"; Cancelled (reason "cancelled") when
  // `interrupt` (may be null) is requested before the compile ends.
  static StatusOr<Grammar> Parse(std::string_view gbnf,
                                 std::string_view root = "root",
                                 const Interrupt* interrupt = nullptr);

  // Returns true when the whole of `text` (UTF-8) is a sentence of the
  // grammar (a recogniser for tests and validation; false on invalid UTF-8).
  bool Accepts(std::string_view text) const;

  // Returns the id of the start rule.
  uint32_t root_rule() const { return root_; }
  // Returns the number of rules, generated ones included.
  size_t num_rules() const { return names_.size(); }
  // Returns the name of `rule` (generated rules are "<rule>_<n>").
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // Returns the positions where the alternatives of `rule` start.
  std::span<const uint32_t> alternatives(uint32_t rule) const {
    return alts_[rule];
  }
  // Returns the element at flat position `pos`.
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  // Returns char class `id`.
  const CharClass& char_class(uint32_t id) const { return classes_[id]; }
  // Returns the number of flat elements (a size measure for limits).
  size_t num_elements() const { return elements_.size(); }

 private:
  friend class GrammarBuilder;
  Grammar() = default;

  std::vector<std::string> names_;
  std::vector<std::vector<uint32_t>> alts_;
  std::vector<Element> elements_;
  std::vector<CharClass> classes_;
  uint32_t root_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_GRAMMAR_H_
