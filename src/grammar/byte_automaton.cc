#include "grammar/byte_automaton.h"

#include <utility>

namespace kvault {

uint32_t ByteAutomaton::Intern(MatchState state) {
  const size_t hash = state.Hash();
  auto [it, end] = ids_.equal_range(hash);
  for (; it != end; ++it) {
    if (states_[it->second] == state) return it->second;
  }
  const uint32_t id = static_cast<uint32_t>(states_.size());
  ids_.emplace(hash, id);
  states_.push_back(std::move(state));
  next_.resize(next_.size() + 256, kUnknown);
  return id;
}

int32_t ByteAutomaton::Compute(uint32_t state, uint8_t byte) {
  if (!states_[state].MayAccept(grammar_, byte)) {
    next_[size_t{state} * 256 + byte] = kDead;
    return kDead;
  }
  MatchState s = states_[state];
  int32_t result = kDead;
  // A limit hit counts as a rejection: the token is simply not allowed.
  if (s.Step(grammar_, limits_, byte) == StepResult::kOk) {
    result = static_cast<int32_t>(Intern(std::move(s)));
  }
  // Intern may have grown next_, so index again rather than use `cached`.
  next_[size_t{state} * 256 + byte] = result;
  return result;
}

void ByteAutomaton::Clear() {
  states_.clear();
  next_.clear();
  ids_.clear();
}

void ByteAutomaton::Compact(const std::vector<uint32_t*>& keep) {
  std::vector<MatchState> old = std::move(states_);
  Clear();
  for (uint32_t* id : keep) *id = Intern(old[*id]);  // copies: ids repeat
}

}  // namespace kvault
