// SlotJob: a slot action (save, restore, erase, defrag) as the scheduler
// runs it. One path serves synchronous and asynchronous I/O: the job
// starts on the scheduler thread, asks for I/O (kIo) any number of times,
// and ends (kDone) with its outcome; the scheduler runs each I/O on an I/O
// thread, or inline when the job or the pool forbids concurrency
// (IoInline, or a policy whose appends may move cells). The job answers
// its caller itself (through the deliveries, after the next publish); the
// scheduler pins the slot meanwhile and records the outcome's counters in
// one place (SchedulerState::RecordJob).
#ifndef KVAULT_ENGINE_SLOT_JOB_H_
#define KVAULT_ENGINE_SLOT_JOB_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/kv_types.h"
#include "engine/slot.h"

namespace kvault {

// Sink calls and replies held until the scheduler has published the
// snapshot their effects show in.
using Deliveries = std::vector<std::function<void()>>;

enum class JobKind { kSave, kRestore, kErase, kDefrag, kLookup };

// What a job asks for next.
struct JobStep {
  bool wants_io = false;  // run Io(), then Resume with its status
  Status outcome;         // when done: counted by kind
};

// Where a job runs: its slot (null for a pool-wide job) and the replies.
struct JobContext {
  Slot* slot = nullptr;
  Deliveries* deliveries = nullptr;
  uint64_t* clock = nullptr;  // the scheduler's LRU clock
  // A scratch sequence id no other job in flight holds (for a restore's
  // reservation); the same for the job's whole life.
  SeqId scratch;
};

class SlotJob {
 public:
  virtual ~SlotJob() = default;
  // Returns what the job is (for its counters).
  virtual JobKind kind() const = 0;
  // Returns what the job does, for messages ("save slot 1 to f.bin").
  virtual std::string where() const = 0;
  // Scheduler thread, slot pinned: starts the job.
  virtual JobStep Start(JobContext& ctx) = 0;
  // I/O thread (or inline): the file work Start or Resume asked for.
  virtual Status Io() = 0;
  // Scheduler thread: continues after Io returned `io`.
  virtual JobStep Resume(JobContext& ctx, const Status& io) = 0;
  // Scheduler thread, no Io running: answers the caller with `error` and
  // releases what the job holds (also before Start: shutdown, or the I/O
  // capacity is spent).
  virtual void Fail(JobContext& ctx, const Status& error) = 0;
  // Scheduler thread: the I/O deadline passed while Io runs on. Answers
  // the caller with `error` and releases what Io does not use; Late
  // releases the rest when Io returns.
  virtual void TimedOut(JobContext& ctx, const Status& error) = 0;
  virtual void Late(const Status& io) {}
  // True when the next Io must run on the scheduler thread.
  virtual bool IoInline() const { return false; }
  // True when the slot must stay pinned until Io returns, even after a
  // timeout (Io reads the slot's cells).
  virtual bool PinsSlotWhileIo() const { return false; }
  // The scratch sequence the job holds cells under (a restore in flight).
  virtual std::optional<SeqId> scratch() const { return std::nullopt; }
};

// Queues `reply(value)` for delivery after the next publish.
template <typename Fn, typename T>
void Deliver(JobContext& ctx, const Fn& reply, T value) {
  ctx.deliveries->push_back(
      [reply, value = std::move(value)]() mutable { reply(std::move(value)); });
}

}  // namespace kvault

#endif  // KVAULT_ENGINE_SLOT_JOB_H_
