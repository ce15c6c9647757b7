#include "engine/scheduler_state.h"

#include "core/check.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

bool IsMismatch(std::string_view reason) {
  return reason == kReasonModelMismatch || reason == kReasonLayoutMismatch ||
         reason == kReasonDtypeMismatch;
}

void RecordRestore(EngineMetrics& c, const Status& outcome) {
  if (outcome.ok()) {
    ++c.restores_ok;
  } else if (outcome.IsNotFound()) {
    ++c.restores_not_found;
  } else if (outcome.IsResourceExhausted()) {
    ++c.restores_no_room;
  } else if (IsMismatch(outcome.reason())) {
    ++c.restores_mismatch;
  } else if (outcome.IsCorruption()) {
    ++c.restores_corrupt;
  } else {
    ++c.restores_other_error;
  }
}

}  // namespace

Status CancelledStatus(const std::string& what) {
  return CancelledError(what + " cancelled").WithReason(kReasonCancelled);
}

SchedulerState::SchedulerState(uint32_t num_slots) {
  slots.reserve(num_slots);
  for (uint32_t i = 0; i < num_slots; ++i) slots.emplace_back(i);
}

void SchedulerState::SetState(Slot& slot, SlotState to) {
  KV_CHECK(IsValidTransition(slot.state, to))
      << "slot " << slot.id << ": " << SlotStateName(slot.state) << " -> "
      << SlotStateName(to);
  may_admit = may_admit || slot.state == SlotState::kPreempted ||
              (slot.busy() && (to == SlotState::kIdle ||
                               to == SlotState::kSpilled));
  slot.state = to;
}

void SchedulerState::SetAtRest(Slot& slot, const SlotKv& kv) {
  SetState(slot, kv.IsSpilled(slot.seq) ? SlotState::kSpilled
                                        : SlotState::kIdle);
}

void SchedulerState::SyncAtRest(const SlotKv& kv) {
  for (Slot& slot : slots) {
    if (!slot.busy()) SetAtRest(slot, kv);
  }
}

void SchedulerState::RecordJob(JobKind kind, const Status& outcome) {
  switch (kind) {
    case JobKind::kSave:
      ++(outcome.ok() ? counters.saves_ok : counters.saves_failed);
      break;
    case JobKind::kRestore:
      RecordRestore(counters, outcome);
      break;
    case JobKind::kErase:
    case JobKind::kDefrag:
    case JobKind::kLookup:
      break;
  }
}

}  // namespace kvault
