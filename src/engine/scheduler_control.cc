// The scheduler's control surface beside its policy: cancels, shutdown,
// start-up recovery.
#include <utility>

#include "engine/scheduler.h"

namespace kvault {

void Scheduler::Cancel(const std::set<uint64_t>& task_ids) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto* completion = std::get_if<CompletionWork>(&*it);
    if (completion == nullptr || !task_ids.contains(completion->task_id)) {
      ++it;
      continue;
    }
    state_.deliveries.push_back(
        [sink = completion->sink,
         status = CancelledStatus(
             "task " + std::to_string(completion->task_id))] {
          sink->OnDone(status);
        });
    it = queue_.erase(it);
  }
  for (Slot& slot : state_.slots) {
    if (slot.request != nullptr && task_ids.contains(slot.request->task_id)) {
      generation_.Fail(slot, CancelledStatus("task " + std::to_string(
                                                           slot.request->task_id)));
    }
  }
}

void Scheduler::AdoptRecovered(uint32_t slot, std::vector<TokenId> tokens) {
  state_.slots[slot].cached = std::move(tokens);
  state_.SetAtRest(state_.slots[slot], *kv_);
}

void Scheduler::CancelAll() {
  while (!queue_.empty()) {
    Work work = std::move(queue_.front());
    queue_.pop_front();
    const Status cancelled =
        CancelledStatus("task " + std::to_string(TaskIdOf(work)));
    if (auto* action = std::get_if<SlotActionWork>(&work)) {
      jobs_.FailUnstarted(*action, cancelled);
    } else {
      auto sink = std::get<CompletionWork>(work).sink;
      state_.deliveries.push_back([sink, cancelled] { sink->OnDone(cancelled); });
    }
  }
  for (Slot& slot : state_.slots) {
    if (slot.request != nullptr) {
      generation_.Fail(slot, CancelledStatus("task " + std::to_string(
                                                           slot.request->task_id)));
    }
  }
}

}  // namespace kvault
