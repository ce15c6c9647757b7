// Slot save/restore/erase and defragmentation. They start on the scheduler
// thread between steps, once the slot is not processing (the queue keeps
// them in order with the slot's requests). A restore is prepared here
// (validated, cells reserved under a scratch sequence), loaded on the I/O
// thread while the other slots keep decoding, and committed here; a save
// snapshots the slot here and writes on the I/O thread. Meanwhile the slot
// is busy ("io") and marked active in the vault, so nothing appends to,
// evicts or moves its cells, and Defrag waits. With contiguous+defrag
// (whose Append may move any cell) and for a spilled slot's save (a tier
// copy), the work runs synchronously.
#include <memory>
#include <utility>

#include "core/log.h"
#include "engine/engine_impl.h"
#include "kv/prefetched_file.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

bool IsMismatch(std::string_view reason) {
  return reason == kReasonModelMismatch || reason == kReasonLayoutMismatch ||
         reason == kReasonDtypeMismatch;
}

}  // namespace

bool Engine::Impl::AsyncIoAllowed() const {
  return !cache_->MayMoveCellsOnAppend();
}

SeqId Engine::Impl::NextScratch() {
  const uint32_t span = kRestoreScratchSeq.value() - kFirstScratchSeq.value();
  while (true) {
    const SeqId seq(kFirstScratchSeq.value() + next_scratch_++ % span);
    if (!scratch_slot_.contains(seq)) return seq;
  }
}

Status Engine::Impl::CheckSavable(Slot& slot, const std::string& where) {
  if (!slot.cached.empty() && !cache_->table().Contains(slot.seq) &&
      !vault_->IsSpilled(slot.seq)) {
    slot.cached.clear();  // a full last tier dropped its spilled copy
  }
  if (!slot.cached.empty()) return Status::Ok();
  ++counters_.saves_failed;
  return FailedPreconditionError(where + ": the slot holds no tokens")
      .WithReason("slot_empty");
}

void Engine::Impl::StartSave(Slot& slot, const std::string& path,
                             Reply<SlotSaveResult> reply) {
  const std::string where =
      "save slot " + std::to_string(slot.id) + " to " + path;
  if (!AsyncIoAllowed() || !cache_->table().Contains(slot.seq)) {
    reply(DoSave(slot, path));
    return;
  }
  Status savable = CheckSavable(slot, where);
  if (savable.ok()) savable = CheckIoCapacity(where);
  StatusOr<SaveSnapshot> snapshot =
      savable.ok() ? vault_->SnapshotForSave(slot.seq)
                   : StatusOr<SaveSnapshot>(savable);
  if (!snapshot.ok()) {
    if (savable.ok() || savable.reason() == kReasonIoTimeout) {
      ++counters_.saves_failed;
    }
    reply(snapshot.status().WithContext(savable.ok() ? where : ""));
    return;
  }
  slot.io = true;
  vault_->SetActive(slot.seq, true);
  auto shared = std::make_shared<SaveSnapshot>(std::move(snapshot).value());
  StartIo(SaveOp(slot, shared, path, where, std::move(reply)));
}

Engine::Impl::IoOp Engine::Impl::SaveOp(Slot& slot,
                                        std::shared_ptr<SaveSnapshot> snapshot,
                                        const std::string& path,
                                        const std::string& where,
                                        Reply<SlotSaveResult> reply) {
  auto written = std::make_shared<StatusOr<SaveResult>>(SaveResult{});
  IoOp op;
  op.io = [env = vault_->env(), storage = cache_->storage(), snapshot, path,
           options = vault_->save_options(), written] {
    *written = WriteSnapshotToFile(env, *storage, *snapshot, path, options);
    return written->status();
  };
  // The writer reads the slot's pages until it returns, so the slot stays
  // pinned ("io") past a timeout; only the caller stops waiting.
  auto release = [this, &slot] {
    slot.io = false;
    vault_->SetActive(slot.seq, false);
  };
  op.finish = [this, &slot, written, where, reply, release](const Status&) {
    release();
    if (!written->ok()) {
      ++counters_.saves_failed;
      reply(written->status().WithContext(where));
      return;
    }
    ++counters_.saves_ok;
    reply(SlotSaveResult{slot.id, (*written)->num_tokens,
                         (*written)->bytes_written, (*written)->elapsed_ms});
  };
  op.on_timeout = [this, where, reply] {
    ++counters_.saves_failed;
    reply(IoTimeoutError(where));
  };
  op.late = [release, where](const Status& status) {
    release();
    KV_LOG(WARNING) << where << " returned after its deadline: " << status;
  };
  return op;
}

Status Engine::Impl::IoTimeoutError(const std::string& where) const {
  return UnavailableError(where + ": the file I/O took longer than " +
                          std::to_string(options_.slot_io_timeout_ms) +
                          " ms (--slot-io-timeout); the slot is unchanged")
      .WithReason(kReasonIoTimeout);
}

StatusOr<SlotSaveResult> Engine::Impl::DoSave(Slot& slot,
                                              const std::string& path) {
  const std::string where =
      "save slot " + std::to_string(slot.id) + " to " + path;
  KV_RETURN_IF_ERROR(CheckSavable(slot, where));
  StatusOr<SaveResult> saved = vault_->Save(slot.seq, path);
  if (!saved.ok()) {
    ++counters_.saves_failed;
    return saved.status().WithContext(where);
  }
  ++counters_.saves_ok;
  SlotSaveResult result;
  result.slot = slot.id;
  result.n_saved = saved->num_tokens;
  result.n_written = saved->bytes_written;
  result.save_ms = saved->elapsed_ms;
  return result;
}

void Engine::Impl::StartRestore(Slot& slot, const std::string& path,
                                Reply<SlotRestoreResult> reply) {
  if (!AsyncIoAllowed()) {
    reply(DoRestore(slot, path));
    return;
  }
  const std::string where =
      "restore " + path + " into slot " + std::to_string(slot.id);
  if (Status capacity = CheckIoCapacity(where); !capacity.ok()) {
    ++counters_.restores_other_error;
    reply(capacity);
    return;
  }
  // Even opening the file happens on an I/O thread: a hung filesystem
  // blocks open() and stat() too.
  slot.io = true;
  vault_->SetActive(slot.seq, true);  // its old KV stays until the commit
  auto file = std::make_shared<std::unique_ptr<RandomAccessFile>>();
  auto release = [this, &slot] {
    slot.io = false;
    vault_->SetActive(slot.seq, false);
  };
  IoOp op;
  op.io = [env = vault_->env(), path, file] {
    StatusOr<std::unique_ptr<RandomAccessFile>> opened =
        PrefetchedFile::Open(env, path);
    if (!opened.ok()) return opened.status();
    *file = std::move(opened).value();
    return Status::Ok();
  };
  op.finish = [this, &slot, file, path, where, reply,
               release](const Status& opened) {
    if (!opened.ok()) {
      release();
      reply(CountRestoreError(opened.WithContext(where)));
      return;
    }
    LoadRestore(slot, std::move(*file), path, where, reply);
  };
  op.on_timeout = [this, where, reply, release] {
    release();
    ++counters_.restores_other_error;
    reply(IoTimeoutError(where));
  };
  op.late = [](const Status&) {};  // nothing reserved yet
  StartIo(std::move(op));
}

void Engine::Impl::LoadRestore(Slot& slot,
                               std::unique_ptr<RandomAccessFile> file,
                               const std::string& path,
                               const std::string& where,
                               Reply<SlotRestoreResult> reply) {
  const SeqId scratch = NextScratch();
  // Prepare reads only the prefetched header, token table and trailer.
  StatusOr<std::unique_ptr<RestoreJob>> job =
      vault_->BeginRestore(slot.seq, std::move(file), path, scratch);
  if (!job.ok()) {
    slot.io = false;
    vault_->SetActive(slot.seq, false);
    reply(CountRestoreError(job.status().WithContext(where)));
    return;
  }
  scratch_slot_[scratch] = slot.id;
  // Shared by the two halves (std::function needs copyable captures).
  auto holder =
      std::make_shared<std::unique_ptr<RestoreJob>>(std::move(job).value());
  IoOp op;
  op.io = [holder] { return (*holder)->Load(); };
  op.finish = [this, &slot, holder, scratch, where,
               reply](const Status& loaded) {
    scratch_slot_.erase(scratch);
    slot.io = false;
    vault_->SetActive(slot.seq, false);
    reply(FinishRestore(
        slot, vault_->EndRestore(std::move(*holder), loaded), where));
  };
  // The target's old KV was never touched: the slot is free at once. The
  // scratch cells stay reserved until Load returns (it writes into them).
  op.on_timeout = [this, &slot, where, reply] {
    slot.io = false;
    vault_->SetActive(slot.seq, false);
    ++counters_.restores_other_error;
    reply(IoTimeoutError(where));
  };
  op.late = [this, holder, scratch](const Status&) {
    scratch_slot_.erase(scratch);
    (void)vault_->EndRestore(std::move(*holder),
                             CancelledError("restore timed out"));
  };
  StartIo(std::move(op));
}

StatusOr<SlotRestoreResult> Engine::Impl::DoRestore(Slot& slot,
                                                    const std::string& path) {
  const std::string where =
      "restore " + path + " into slot " + std::to_string(slot.id);
  return FinishRestore(slot, vault_->Restore(slot.seq, path), where);
}

StatusOr<SlotRestoreResult> Engine::Impl::FinishRestore(
    Slot& slot, StatusOr<VaultRestoreResult> restored,
    const std::string& where) {
  // Slots evicted for room keep their token lists: they are spilled now.
  if (!restored.ok()) {
    return CountRestoreError(restored.status().WithContext(where));
  }
  RefreshCached(slot);
  slot.last_use = ++clock_;
  ++counters_.restores_ok;
  SlotRestoreResult result;
  result.slot = slot.id;
  result.n_restored = restored->num_tokens;
  result.n_read = restored->bytes_read;
  result.restore_ms = restored->elapsed_ms;
  result.evicted = std::move(restored->evicted);
  return result;
}

Status Engine::Impl::CountRestoreError(const Status& status) {
  if (status.IsNotFound()) {
    ++counters_.restores_not_found;
    return status.reason().empty() ? status.WithReason("file_not_found")
                                   : status;
  }
  if (status.IsResourceExhausted()) {
    ++counters_.restores_no_room;
    return status.WithReason("no_room");
  }
  if (IsMismatch(status.reason())) {
    ++counters_.restores_mismatch;
  } else if (status.IsCorruption()) {
    ++counters_.restores_corrupt;
  } else {
    ++counters_.restores_other_error;
  }
  return status;
}

void Engine::Impl::RefreshCached(Slot& slot) {
  slot.cached.clear();
  bool canonical = true;
  for (const TokenPos& cell : cache_->table().Cells(slot.seq)) {
    canonical = canonical && cell.pos == static_cast<Pos>(slot.cached.size());
    slot.cached.push_back(cell.token);
  }
  if (!canonical) {
    // Cells are always at positions 0..n-1 in this engine (the next token
    // goes at n); a file with gaps would break that.
    KV_LOG(WARNING) << "slot " << slot.id
                    << ": restored positions are not 0..n-1";
  }
}

void Engine::Impl::RecoverSpilledSlots() {
  for (SeqId seq : vault_->SpilledSequences()) {
    if (seq.value() < slots_.size()) {
      Slot& slot = slots_[seq.value()];
      StatusOr<std::optional<VaultRestoreResult>> back =
          vault_->EnsureResident(seq);
      if (back.ok()) {
        RefreshCached(slot);
        KV_LOG(INFO) << "slot " << slot.id << ": recovered "
                     << slot.cached.size() << " tokens from the disk tier";
        continue;
      }
      KV_LOG(WARNING) << "slot " << slot.id
                      << ": dropping the KV an earlier run spilled: "
                      << back.status();
    }
    Status erased = vault_->Erase(seq);
    if (!erased.ok()) KV_LOG(WARNING) << erased;
  }
}

StatusOr<uint64_t> Engine::Impl::DoErase(Slot& slot) {
  const uint64_t num_tokens = slot.cached.size();
  slot.cached.clear();
  KV_RETURN_IF_ERROR(vault_->Erase(slot.seq).WithContext(
      "erase slot " + std::to_string(slot.id)));
  return num_tokens;
}

StatusOr<DefragReport> Engine::Impl::DoDefrag() {
  DefragReport report = cache_->Defrag();
  KV_LOG(INFO) << "defrag: " << report.num_moves << " moves, "
               << report.cells_moved << " cells moved in " << report.elapsed_ms
               << " ms";
  return report;
}

}  // namespace kvault
