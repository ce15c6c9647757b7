// GrammarBuilder: collects rules while a front end (the GBNF parser) reads
// them, then checks and flattens them into a Grammar: every referenced rule
// is defined, the root exists, no rule is left-recursive, sizes are bounded.
#ifndef KVAULT_GRAMMAR_GRAMMAR_BUILDER_H_
#define KVAULT_GRAMMAR_GRAMMAR_BUILDER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/interrupt.h"
#include "core/status_or.h"
#include "grammar/grammar.h"

namespace kvault {

struct SourcePos {
  int line = 0;  // 1-based; 0 when unknown
  int column = 0;
};

using Alternative = std::vector<Element>;

class GrammarBuilder {
 public:
  // Most flat elements a grammar may have. Bounds memory for hostile input
  // and the compile's time: at the cap a compile takes about 0.6 s
  // (2 vCPU). A client that leaves or a server that stops does not wait
  // for it: the compile polls `interrupt`.
  static constexpr size_t kMaxElements = size_t{1} << 20;

  // `interrupt` (may be null) stops the parse and Finish with Cancelled.
  explicit GrammarBuilder(const Interrupt* interrupt = nullptr)
      : poller_(interrupt, "the grammar compile") {}

  // Returns Cancelled once the interrupt is requested (front ends call it
  // once per alternative they read); OK otherwise.
  Status Poll() { return poller_.Poll(); }

  // Returns the id of rule `name`, creating it (undefined) on first use;
  // `used_at` is remembered to report an undefined rule.
  uint32_t RuleId(std::string_view name, SourcePos used_at);
  // Gives named rule `id` its alternatives; an error if already defined.
  Status Define(uint32_t id, std::vector<Alternative> alts, SourcePos at);
  // Returns a fresh generated rule "<base>_<n>" without alternatives yet
  // (so that its alternatives may refer to it).
  uint32_t NewGenerated(std::string_view base, SourcePos at);
  // Sets the alternatives of generated rule `id`; an error past the limits.
  Status SetGenerated(uint32_t id, std::vector<Alternative> alts);
  // Returns the id of `c`, shared with an equal class added before.
  uint32_t AddClass(CharClass c);
  // Returns true when at least one rule was defined.
  bool empty() const { return defined_count_ == 0; }
  // Checks and flattens the rules into a Grammar whose start is `root`.
  StatusOr<Grammar> Finish(std::string_view root) &&;

 private:
  struct Rule {
    std::string name;
    std::vector<Alternative> alts;
    bool defined = false;
    SourcePos pos;  // definition, or first use while undefined
  };
  Status CheckLeftRecursion();
  std::vector<bool> NullableRules() const;
  // Rewrites every rule into an equivalent one whose alternatives start
  // with distinct elements (duplicates dropped, a shared first element
  // factored out into a generated rule of the tails), recursively: an
  // alternation of n literals becomes a trie, so the matcher tracks one
  // stack per distinct next character instead of one per alternative.
  Status LeftFactor();
  // LeftFactor for one rule; returns its new alternatives (it may add
  // rules).
  std::vector<Alternative> FactorAlternatives(uint32_t id);

  std::vector<Rule> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<CharClass> classes_;
  std::unordered_map<std::string, uint32_t> class_ids_;  // by ToString()
  std::unordered_map<std::string, int> generated_count_;
  size_t element_count_ = 0;
  size_t defined_count_ = 0;
  InterruptPoller poller_;
};

// Returns "grammar:LINE:COL: " (or "grammar: " when the position is unknown).
std::string PosPrefix(SourcePos pos);

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_GRAMMAR_BUILDER_H_
