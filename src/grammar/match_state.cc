#include "grammar/match_state.h"

#include <algorithm>
#include <utility>

#include "grammar/utf8.h"

namespace kvault {
namespace {

// Expands `seed` until every resulting stack has a character class (or
// nothing) on top, appending those stacks to `out`. Rule references are
// replaced by each alternative; a finished alternative is not pushed, so
// tail positions cost no stack depth.
StepResult Expand(const Grammar& g, const MatchLimits& limits, ParseStack seed,
                  size_t* work, std::vector<ParseStack>* out) {
  std::vector<ParseStack> todo;
  todo.push_back(std::move(seed));
  while (!todo.empty()) {
    ParseStack s = std::move(todo.back());
    todo.pop_back();
    if (++*work > limits.max_work) return StepResult::kLimit;
    if (s.empty() || g.element(s.back()).kind == ElementKind::kChar) {
      out->push_back(std::move(s));
      continue;
    }
    const uint32_t pos = s.back();
    s.pop_back();
    if (g.element(pos + 1).kind != ElementKind::kEnd) s.push_back(pos + 1);
    for (uint32_t start : g.alternatives(g.element(pos).arg)) {
      ParseStack t = s;
      if (g.element(start).kind != ElementKind::kEnd) t.push_back(start);
      if (t.size() > limits.max_depth) return StepResult::kLimit;
      todo.push_back(std::move(t));
    }
  }
  return StepResult::kOk;
}

StepResult Normalize(const MatchLimits& limits,
                     std::vector<ParseStack>* stacks) {
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
  if (stacks->size() > limits.max_stacks) return StepResult::kLimit;
  return stacks->empty() ? StepResult::kDead : StepResult::kOk;
}

constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};

}  // namespace

StepResult MatchState::Initial(const Grammar& g, const MatchLimits& limits,
                               MatchState* out) {
  *out = MatchState();
  size_t work = 0;
  for (uint32_t start : g.alternatives(g.root_rule())) {
    ParseStack s;
    if (g.element(start).kind != ElementKind::kEnd) s.push_back(start);
    const StepResult r = Expand(g, limits, std::move(s), &work, &out->stacks_);
    if (r != StepResult::kOk) return r;
  }
  return Normalize(limits, &out->stacks_);
}

StepResult MatchState::AdvanceCodePoint(const Grammar& g,
                                        const MatchLimits& limits,
                                        uint32_t cp) {
  std::vector<ParseStack> next;
  size_t work = 0;
  for (const ParseStack& s : stacks_) {
    if (s.empty()) continue;
    const uint32_t pos = s.back();
    if (!g.char_class(g.element(pos).arg).Matches(cp)) continue;
    ParseStack t(s.begin(), s.end() - 1);
    if (g.element(pos + 1).kind != ElementKind::kEnd) t.push_back(pos + 1);
    const StepResult r = Expand(g, limits, std::move(t), &work, &next);
    if (r != StepResult::kOk) return r;
  }
  stacks_ = std::move(next);
  return Normalize(limits, &stacks_);
}

bool MatchState::PartialViable(const Grammar& g) const {
  const int shift = 6 * need_;
  uint32_t lo = partial_ << shift;
  uint32_t hi = lo | ((uint32_t{1} << shift) - 1);
  lo = std::max(lo, kMinForLength[len_]);
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
  for (const ParseStack& s : stacks_) {
    if (!s.empty() &&
        g.char_class(g.element(s.back()).arg).IntersectsRange(lo, hi)) {
      return true;
    }
  }
  return false;
}

StepResult MatchState::Step(const Grammar& g, const MatchLimits& limits,
                            uint8_t byte) {
  if (need_ == 0) {
    const int n = Utf8SequenceLength(byte);
    if (n == 0) return StepResult::kDead;
    if (n == 1) return AdvanceCodePoint(g, limits, byte);
    static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    len_ = static_cast<uint8_t>(n);
    need_ = static_cast<uint8_t>(n - 1);
    partial_ = byte & kLeadMask[n];
    return PartialViable(g) ? StepResult::kOk : StepResult::kDead;
  }
  if ((byte & 0xC0) != 0x80) return StepResult::kDead;
  partial_ = (partial_ << 6) | (byte & 0x3F);
  if (--need_ > 0) {
    return PartialViable(g) ? StepResult::kOk : StepResult::kDead;
  }
  const uint32_t cp = partial_;
  const uint8_t len = len_;
  partial_ = 0;
  len_ = 0;
  if (cp < kMinForLength[len] || cp > kMaxCodePoint ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return StepResult::kDead;
  }
  return AdvanceCodePoint(g, limits, cp);
}

bool MatchState::MayAccept(const Grammar& g, uint8_t byte) const {
  if (need_ > 0) return (byte & 0xC0) == 0x80;  // the full check is cheap
  const int n = Utf8SequenceLength(byte);
  if (n == 0) return false;
  // The code points a sequence with this first byte can encode.
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  const int shift = 6 * (n - 1);
  const uint32_t base = static_cast<uint32_t>(byte & kLeadMask[n]) << shift;
  const uint32_t lo = std::max(base, kMinForLength[n]);
  const uint32_t hi = base | ((uint32_t{1} << shift) - 1);
  for (const ParseStack& s : stacks_) {
    if (s.empty()) continue;
    const CharClass& c = g.char_class(g.element(s.back()).arg);
    if (n == 1 ? c.Matches(byte) : c.IntersectsRange(lo, hi)) return true;
  }
  return false;
}

bool MatchState::IsComplete() const {
  return need_ == 0 && !stacks_.empty() && stacks_.front().empty();
}

bool MatchState::CanContinue() const {
  return !stacks_.empty() && !stacks_.back().empty();
}

size_t MatchState::Hash() const {
  uint64_t h = 1469598103934665603ull ^ partial_ ^ (uint64_t{need_} << 40);
  for (const ParseStack& s : stacks_) {
    for (uint32_t v : s) h = (h ^ v) * 1099511628211ull;
    h = (h ^ 0xFFFFFFFFull) * 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

}  // namespace kvault
