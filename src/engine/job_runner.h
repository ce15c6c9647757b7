// JobRunner: runs slot actions (SlotJob) for the scheduler: pins the slot
// (state io) for the job's life, hands each I/O to the engine's I/O
// threads (or runs it inline), enforces the slot I/O deadline, and counts
// every outcome in one place. Scheduler thread only; the engine calls
// OnIoDone when an I/O it took with TakeIo returns.
#ifndef KVAULT_ENGINE_JOB_RUNNER_H_
#define KVAULT_ENGINE_JOB_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/scheduler_ports.h"
#include "engine/scheduler_state.h"
#include "engine/work.h"

namespace kvault {

struct JobRunnerOptions {
  uint32_t io_timeout_ms = 30000;
  // New asynchronous I/O is refused while this many timed-out operations
  // are still stuck in the filesystem.
  uint32_t max_stuck = 1;
};

// One I/O for an I/O thread: run job->Io(), then report OnIoDone(id).
struct IoTicket {
  uint64_t id = 0;
  SlotJob* job = nullptr;  // owned by the runner until OnIoDone
};

class JobRunner {
 public:
  // None owned; both must outlive this.
  JobRunner(const JobRunnerOptions& options, SchedulerState* state,
            SlotKv* kv);

  // Starts `work` (its slot, if any, is at rest).
  void Start(SlotActionWork work);
  // Continues the job whose I/O `id` returned `io`.
  void OnIoDone(uint64_t id, const Status& io);
  // Returns the I/O to run on I/O threads since the last call.
  std::vector<IoTicket> TakeIo();
  // Returns the earliest deadline of an I/O not yet timed out.
  std::optional<EngineClock::time_point> NextDeadline() const;
  // Times out the I/O past its deadline; returns how many did (each
  // leaves an I/O thread stuck).
  size_t Expire(EngineClock::time_point now);
  // Returns the jobs whose I/O runs (timed-out ones included).
  size_t num_io_in_flight() const;
  // Returns the slot each restore in flight reserves cells for, by its
  // scratch sequence.
  std::map<SeqId, uint32_t> ScratchOwners() const;
  // Answers a job that never started with `error`.
  void FailUnstarted(SlotActionWork& work, const Status& error);

 private:
  struct Running {
    std::unique_ptr<SlotJob> job;
    std::optional<uint32_t> slot;
    SeqId scratch;
    bool io_running = false;
    bool timed_out = false;
    EngineClock::time_point deadline;
  };

  // Acts on `step`: runs or queues the I/O it asks for, or ends the job.
  void Continue(uint64_t id, JobStep step);
  // Counts the outcome, unpins the slot and forgets the job.
  void End(uint64_t id, const Status& outcome);
  // Unpins `run`'s slot.
  void Unpin(const Running& run);
  // Returns the context the job `run` sees.
  JobContext ContextFor(Running& run);
  // Returns a scratch sequence id no running job holds.
  SeqId NextScratch();
  // Unavailable (io_timeout), naming the stuck operations, when no new
  // asynchronous I/O may start.
  Status CheckCapacity() const;

  JobRunnerOptions options_;
  SchedulerState* state_;
  SlotKv* kv_;
  std::map<uint64_t, Running> running_;
  std::vector<IoTicket> to_run_;
  uint64_t next_id_ = 1;
  uint32_t next_scratch_ = 0;
};

// Unavailable (io_timeout): `where`'s I/O took longer than the deadline.
Status IoTimeoutError(const std::string& where, uint32_t timeout_ms);

}  // namespace kvault

#endif  // KVAULT_ENGINE_JOB_RUNNER_H_
