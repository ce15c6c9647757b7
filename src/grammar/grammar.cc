#include "grammar/grammar.h"

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_builder.h"
#include "grammar/match_state.h"

namespace kvault {

StatusOr<Grammar> Grammar::Parse(std::string_view gbnf, std::string_view root) {
  GrammarBuilder builder;
  KV_RETURN_IF_ERROR(GbnfParser::Parse(gbnf, &builder));
  return std::move(builder).Finish(root);
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
