#include "engine/slot.h"

#include <algorithm>
#include <utility>

namespace kvault {

double MsBetween(EngineClock::time_point start, EngineClock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

Request::Request(uint64_t id, CompletionParams p,
                 std::shared_ptr<CompletionSink> s, const Tokenizer* tokenizer,
                 const SamplerContext& sampling)
    : task_id(id),
      params(std::move(p)),
      sink(std::move(s)),
      sampler(params.sampling, sampling),
      detok(tokenizer),
      stop(params.stop),
      start(EngineClock::now()) {}

const char* SlotStateName(SlotState state) {
  switch (state) {
    case SlotState::kIdle:
      return "idle";
    case SlotState::kSpilled:
      return "spilled";
    case SlotState::kPrefilling:
      return "prefilling";
    case SlotState::kGenerating:
      return "generating";
    case SlotState::kPreempted:
      return "preempted";
    case SlotState::kIo:
      return "io";
  }
  return "?";
}

const char* SlotDisplayState(const Slot& slot, bool spilled) {
  if (slot.state == SlotState::kIdle && spilled) return "spilled";
  // /slots' name for it predates SlotState's.
  if (slot.state == SlotState::kPrefilling) return "prefill";
  return SlotStateName(slot.state);
}

bool IsValidTransition(SlotState from, SlotState to) {
  using S = SlotState;
  const bool at_rest = from == S::kIdle || from == S::kSpilled;
  const bool running = from == S::kPrefilling || from == S::kGenerating;
  switch (to) {
    case S::kIdle:
    case S::kSpilled:
      return at_rest || running || from == S::kPreempted || from == S::kIo;
    case S::kPrefilling:
      return at_rest || from == S::kPreempted;
    case S::kGenerating:
      return from == S::kPrefilling || from == S::kPreempted;
    case S::kPreempted:
      return running;
    case S::kIo:
      return at_rest;
  }
  return false;
}

size_t CommonPrefix(const std::vector<TokenId>& a,
                    const std::vector<TokenId>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace kvault
