#include "engine/job_runner.h"

#include <utility>

#include "core/check.h"
#include "kv/state_file.h"

namespace kvault {

Status IoTimeoutError(const std::string& where, uint32_t timeout_ms) {
  return UnavailableError(where + ": the file I/O took longer than " +
                          std::to_string(timeout_ms) +
                          " ms (--slot-io-timeout); the slot is unchanged")
      .WithReason(kReasonIoTimeout);
}

JobRunner::JobRunner(const JobRunnerOptions& options, SchedulerState* state,
                     SlotKv* kv)
    : options_(options), state_(state), kv_(kv) {}

JobContext JobRunner::ContextFor(Running& run) {
  JobContext ctx;
  ctx.slot = run.slot ? &state_->slots[*run.slot] : nullptr;
  ctx.deliveries = &state_->deliveries;
  ctx.clock = &state_->clock;
  ctx.scratch = run.scratch;
  return ctx;
}

SeqId JobRunner::NextScratch() {
  const uint32_t span = kPrefixLoadSeq.value() - kFirstScratchSeq.value();
  while (true) {
    const SeqId seq(kFirstScratchSeq.value() + next_scratch_++ % span);
    bool used = false;
    for (const auto& [id, run] : running_) used = used || run.scratch == seq;
    if (!used) return seq;
  }
}

void JobRunner::Start(SlotActionWork work) {
  const uint64_t id = next_id_++;
  Running& run = running_[id];
  run.job = std::move(work.job);
  run.slot = work.slot;
  run.scratch = NextScratch();
  if (run.slot) state_->SetState(state_->slots[*run.slot], SlotState::kIo);
  JobContext ctx = ContextFor(run);
  Continue(id, run.job->Start(ctx));
}

void JobRunner::Continue(uint64_t id, JobStep step) {
  Running& run = running_.at(id);
  while (step.wants_io && run.job->IoInline()) {
    const Status io = run.job->Io();
    JobContext ctx = ContextFor(run);
    step = run.job->Resume(ctx, io);
  }
  if (!step.wants_io) {
    End(id, step.outcome);
    return;
  }
  if (Status capacity = CheckCapacity(); !capacity.ok()) {
    const Status error = capacity.WithContext(run.job->where());
    JobContext ctx = ContextFor(run);
    run.job->Fail(ctx, error);
    End(id, error);
    return;
  }
  run.io_running = true;
  run.deadline = EngineClock::now() +
                 std::chrono::milliseconds(options_.io_timeout_ms);
  to_run_.push_back({id, run.job.get()});
}

void JobRunner::End(uint64_t id, const Status& outcome) {
  auto it = running_.find(id);
  state_->RecordJob(it->second.job->kind(), outcome);
  Unpin(it->second);
  running_.erase(it);
}

void JobRunner::Unpin(const Running& run) {
  if (run.slot) state_->SetAtRest(state_->slots[*run.slot], *kv_);
}

void JobRunner::OnIoDone(uint64_t id, const Status& io) {
  auto it = running_.find(id);
  KV_CHECK(it != running_.end()) << "I/O " << id << " of no job";
  Running& run = it->second;
  run.io_running = false;
  if (!run.timed_out) {
    JobContext ctx = ContextFor(run);
    Continue(id, run.job->Resume(ctx, io));
    return;
  }
  --state_->counters.io_stuck;
  run.job->Late(io);
  if (run.job->PinsSlotWhileIo()) Unpin(run);
  running_.erase(it);
}

std::vector<IoTicket> JobRunner::TakeIo() {
  std::vector<IoTicket> out;
  out.swap(to_run_);
  return out;
}

std::optional<EngineClock::time_point> JobRunner::NextDeadline() const {
  std::optional<EngineClock::time_point> next;
  for (const auto& [id, run] : running_) {
    if (run.io_running && !run.timed_out && (!next || run.deadline < *next)) {
      next = run.deadline;
    }
  }
  return next;
}

size_t JobRunner::Expire(EngineClock::time_point now) {
  size_t num_expired = 0;
  for (auto& [id, run] : running_) {
    if (!run.io_running || run.timed_out || now < run.deadline) continue;
    run.timed_out = true;
    ++num_expired;
    ++state_->counters.io_timeouts;
    ++state_->counters.io_stuck;
    const Status error =
        IoTimeoutError(run.job->where(), options_.io_timeout_ms);
    JobContext ctx = ContextFor(run);
    run.job->TimedOut(ctx, error);
    state_->RecordJob(run.job->kind(), error);
    if (!run.job->PinsSlotWhileIo()) Unpin(run);
  }
  return num_expired;
}

size_t JobRunner::num_io_in_flight() const {
  size_t n = 0;
  for (const auto& [id, run] : running_) n += run.io_running ? 1 : 0;
  return n;
}

std::map<SeqId, uint32_t> JobRunner::ScratchOwners() const {
  std::map<SeqId, uint32_t> owners;
  for (const auto& [id, run] : running_) {
    if (!run.slot) continue;
    if (std::optional<SeqId> scratch = run.job->scratch()) {
      owners[*scratch] = *run.slot;
    }
  }
  return owners;
}

void JobRunner::FailUnstarted(SlotActionWork& work, const Status& error) {
  Running run;
  run.slot = work.slot;
  JobContext ctx = ContextFor(run);
  ctx.slot = nullptr;  // the slot is not the job's
  work.job->Fail(ctx, error);
}

Status JobRunner::CheckCapacity() const {
  // Each stuck operation pins a thread (and a restore's reserved cells);
  // past one per slot the filesystem is clearly not coming back soon.
  if (state_->counters.io_stuck < options_.max_stuck) return Status::Ok();
  return UnavailableError(std::to_string(state_->counters.io_stuck) +
                          " slot file operations are stuck in the "
                          "filesystem past their deadline")
      .WithReason(kReasonIoTimeout);
}

}  // namespace kvault
