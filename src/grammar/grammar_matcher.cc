#include "grammar/grammar_matcher.h"

#include <utility>

#include "core/check.h"
#include "core/reasons.h"
#include "grammar/byte_automaton.h"

namespace kvault {
namespace {

Status LimitError(const MatchLimits& limits) {
  return InvalidArgumentError(
             "grammar matcher limit hit: more than " +
      std::to_string(limits.max_stacks) +
      " parse stacks, nesting deeper than " + std::to_string(limits.max_depth) +
      " or more than " + std::to_string(limits.max_work) +
      " expansions in one step")
      .WithReason(kReasonGrammarLimitExceeded);
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               MatchLimits limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  KV_CHECK(grammar_ != nullptr) << "GrammarMatcher needs a grammar";
  Reset();
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : grammar_(other.grammar_),
      limits_(other.limits_),
      state_(other.state_),
      status_(other.status_) {}

GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& other) {
  if (this != &other) {
    grammar_ = other.grammar_;
    limits_ = other.limits_;
    state_ = other.state_;
    status_ = other.status_;
    dfa_.reset();
  }
  return *this;
}

GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

void GrammarMatcher::Reset() {
  status_ = Status::Ok();
  if (MatchState::Initial(*grammar_, limits_, &state_) == StepResult::kLimit) {
    status_ = LimitError(limits_);
    state_ = MatchState();
  }
}

StepResult GrammarMatcher::Advance(std::string_view bytes,
                                   MatchState* state) const {
  for (char c : bytes) {
    const StepResult r =
        state->Step(*grammar_, limits_, static_cast<uint8_t>(c));
    if (r != StepResult::kOk) return r;
  }
  return StepResult::kOk;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  MatchState next = state_;
  const StepResult r = Advance(bytes, &next);
  if (r == StepResult::kLimit) status_ = LimitError(limits_);
  if (r != StepResult::kOk) return false;
  state_ = std::move(next);
  return true;
}

bool GrammarMatcher::CanAccept(std::string_view bytes) const {
  MatchState next = state_;
  return Advance(bytes, &next) == StepResult::kOk;
}

void GrammarMatcher::AllowedTokens(const TokenTrie& trie,
                                   std::vector<uint8_t>* allowed) const {
  allowed->assign(trie.vocab_size(), 0);
  if (state_.empty()) return;
  if (dfa_ == nullptr || dfa_->size() > ByteAutomaton::kMaxStates) {
    dfa_ = std::make_unique<ByteAutomaton>(*grammar_, limits_);
  }
  ByteAutomaton& dfa = *dfa_;
  struct Frame {
    const TokenTrie::Edge* next_edge;
    const TokenTrie::Edge* end;
    uint32_t state;
  };
  std::vector<Frame> path;
  const auto root_edges = trie.edges(TokenTrie::kRoot);
  path.push_back({root_edges.data(), root_edges.data() + root_edges.size(),
                  dfa.Intern(state_)});
  uint8_t* mask = allowed->data();
  while (!path.empty()) {
    Frame& f = path.back();
    if (f.next_edge == f.end) {
      path.pop_back();
      continue;
    }
    const TokenTrie::Edge e = *f.next_edge++;
    const int32_t next = dfa.Next(f.state, e.byte);
    if (next == ByteAutomaton::kDead) continue;  // prune the whole subtree
    for (uint32_t id : trie.tokens(e.child)) mask[id] = 1;
    const auto edges = trie.edges(e.child);
    if (edges.empty()) continue;
    path.push_back({edges.data(), edges.data() + edges.size(),
                    static_cast<uint32_t>(next)});
    if (dfa.size() > ByteAutomaton::kMaxStates) {
      std::vector<uint32_t*> keep;
      for (Frame& p : path) keep.push_back(&p.state);
      dfa.Compact(keep);
    }
  }
}

}  // namespace kvault
