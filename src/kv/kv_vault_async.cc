// KvVault: restores and saves whose file I/O runs on another thread. The
// owner-thread halves (BeginRestore, EndRestore, SnapshotForSave) do the
// bookkeeping Restore and Save do; the I/O is RestoreJob::Load and
// WriteSnapshotToFile (restore_job.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_vault.h"

namespace kvault {

StatusOr<std::unique_ptr<RestoreJob>> KvVault::BeginRestore(
    SeqId seq, StatusOr<std::unique_ptr<RandomAccessFile>> file,
    const std::string& path, SeqId scratch) {
  if (IsScratchSeq(seq)) {
    return InvalidArgumentError("restore into " + SeqLabel(seq) +
                                ", a reserved restore scratch sequence");
  }
  if (!file.ok()) {
    const StatusOr<RestoreResult> failed(file.status());
    return FinishRestore(seq, failed, {}).status();
  }
  std::vector<Eviction> evicted;
  StatusOr<std::unique_ptr<RestoreJob>> job =
      RestoreJob::Prepare(std::move(file).value(), fingerprint_, cache_, seq,
                          scratch, RoomForRestore(seq, scratch, &evicted));
  if (!job.ok()) {
    // Booked as a failed restore now: there is no job to end.
    const StatusOr<RestoreResult> failed(job.status().WithContext(path));
    return FinishRestore(seq, failed, std::move(evicted)).status();
  }
  // The engine learns here which sequences left the cache; EndRestore
  // reports them again with the result.
  last_evictions_ = evicted;
  pending_restores_[scratch] = PendingRestore{path, std::move(evicted)};
  return job;
}

StatusOr<VaultRestoreResult> KvVault::EndRestore(
    std::unique_ptr<RestoreJob> job, const Status& load_status) {
  if (job == nullptr) return InvalidArgumentError("EndRestore: null job");
  const SeqId seq = job->target();
  PendingRestore pending;
  auto it = pending_restores_.find(job->scratch());
  if (it != pending_restores_.end()) {
    pending = std::move(it->second);
    pending_restores_.erase(it);
  }
  if (!load_status.ok()) job->Abort();
  // Commit aborts the job itself when it fails.
  StatusOr<RestoreResult> restored =
      load_status.ok() ? job->Commit() : StatusOr<RestoreResult>(load_status);
  if (restored.ok()) {
    spill_tiers_.DiscardStale(seq, "restored from " + pending.path);
  } else if (!pending.path.empty()) {
    restored = restored.status().WithContext(pending.path);
  }
  return FinishRestore(seq, restored, std::move(pending.evicted));
}

StatusOr<SaveSnapshot> KvVault::SnapshotForSave(SeqId seq) const {
  if (IsScratchSeq(seq) || !cache_->table().Contains(seq)) {
    return NotFoundError("save " + SeqLabel(seq) + ": not resident");
  }
  return TakeSaveSnapshot(*cache_, seq, fingerprint_);
}

}  // namespace kvault
