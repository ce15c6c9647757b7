#include "grammar/grammar.h"

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_builder.h"
#include "grammar/match_state.h"

namespace kvault {
namespace {

// A compile error is the grammar's fault (reason invalid_grammar) unless
// the compile was stopped.
Status Classify(Status s) {
  if (s.code() == StatusCode::kCancelled) return s;
  return s.WithReason(kReasonInvalidGrammar);
}

}  // namespace

StatusOr<Grammar> Grammar::Parse(std::string_view gbnf, std::string_view root,
                                 const Interrupt* interrupt) {
  GrammarBuilder builder(interrupt);
  Status parsed = GbnfParser::Parse(gbnf, &builder);
  if (!parsed.ok()) return Classify(std::move(parsed));
  StatusOr<Grammar> g = std::move(builder).Finish(root);
  if (!g.ok()) return Classify(g.status());
  return g;
}

bool Grammar::Accepts(std::string_view text) const {
  const MatchLimits limits;
  MatchState state;
  if (MatchState::Initial(*this, limits, &state) != StepResult::kOk) {
    return false;
  }
  for (char c : text) {
    if (state.Step(*this, limits, static_cast<uint8_t>(c)) != StepResult::kOk) {
      return false;
    }
  }
  return state.IsComplete();
}

}  // namespace kvault
