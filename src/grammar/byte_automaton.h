// ByteAutomaton: a lazily built DFA over bytes whose states are interned
// MatchStates. Walking a token trie visits hundreds of thousands of byte
// edges but only a handful of distinct matcher states (inside a JSON string
// every ordinary character leads back to the same state), so each distinct
// (state, byte) step is computed once and then answered by a table lookup.
#ifndef KVAULT_GRAMMAR_BYTE_AUTOMATON_H_
#define KVAULT_GRAMMAR_BYTE_AUTOMATON_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/match_state.h"

namespace kvault {

class ByteAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  // States kept before Compact() is due (bounds memory to a few MiB).
  static constexpr size_t kMaxStates = 4096;

  ByteAutomaton(const Grammar& g, const MatchLimits& limits)
      : grammar_(g), limits_(limits) {}

  // Returns the id of `state`, adding it when new.
  uint32_t Intern(MatchState state);
  // Returns the state reached from `state` by `byte`, or kDead.
  int32_t Next(uint32_t state, uint8_t byte) {
    const int32_t cached = next_[size_t{state} * 256 + byte];
    return cached != kUnknown ? cached : Compute(state, byte);
  }
  // Returns the number of interned states.
  size_t size() const { return states_.size(); }
  // Forgets every state.
  void Clear();
  // Forgets every state except those whose ids `keep` points at, and
  // rewrites those ids (called when size() passes kMaxStates).
  void Compact(const std::vector<uint32_t*>& keep);

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t Compute(uint32_t state, uint8_t byte);

  const Grammar& grammar_;
  MatchLimits limits_;
  std::vector<MatchState> states_;
  std::vector<int32_t> next_;  // 256 per state
  // Hash -> ids: states are stored once, in states_.
  std::unordered_multimap<size_t, uint32_t> ids_;
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_BYTE_AUTOMATON_H_
