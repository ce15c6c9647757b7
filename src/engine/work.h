// The work the engine queues for the scheduler: completions and slot
// actions, in submission order (FIFO per slot).
#ifndef KVAULT_ENGINE_WORK_H_
#define KVAULT_ENGINE_WORK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <variant>

#include "engine/engine.h"
#include "engine/slot_job.h"

namespace kvault {

struct CompletionWork {
  uint64_t task_id = 0;
  CompletionParams params;  // params.slot: the slot asked for, if any
  std::shared_ptr<CompletionSink> sink;
};

struct SlotActionWork {
  uint64_t task_id = 0;
  std::optional<uint32_t> slot;  // nullopt: a pool-wide action (defrag)
  std::unique_ptr<SlotJob> job;
};

using Work = std::variant<CompletionWork, SlotActionWork>;

// Returns the work's task id.
inline uint64_t TaskIdOf(const Work& work) {
  return std::visit([](const auto& w) { return w.task_id; }, work);
}

}  // namespace kvault

#endif  // KVAULT_ENGINE_WORK_H_
