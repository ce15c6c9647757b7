#include "engine/slot_jobs.h"

#include <optional>
#include <utility>

#include "core/log.h"
#include "kv/slot_file.h"
#include "kv/spill_tiers.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

// Ends a job with `outcome`, answering its caller.
template <typename T>
JobStep Done(JobContext& ctx, const Reply<T>& reply, StatusOr<T> result) {
  const Status outcome = result.status();
  Deliver(ctx, reply, std::move(result));
  return JobStep{false, outcome};
}

// Gives a failed restore the API's reasons.
Status RestoreError(const Status& status) {
  if (status.IsNotFound() && status.reason().empty()) {
    return status.WithReason(kReasonFileNotFound);
  }
  if (status.IsResourceExhausted()) return status.WithReason(kReasonNoRoom);
  return status;
}

class SaveJob final : public SlotJob {
 public:
  SaveJob(JobTarget t, uint32_t slot, std::string path, bool sync,
          Reply<SlotSaveResult> reply)
      : t_(t), slot_(slot), seq_(slot), path_(std::move(path)), sync_(sync),
        reply_(std::move(reply)) {}

  JobKind kind() const override { return JobKind::kSave; }
  std::string where() const override {
    return "save slot " + std::to_string(slot_) + " to " + path_;
  }
  bool IoInline() const override { return !snapshot_ && !spilled_; }
  bool PinsSlotWhileIo() const override { return true; }

  JobStep Start(JobContext& ctx) override {
    Slot& slot = *ctx.slot;
    const bool resident = t_.cache->table().Contains(seq_);
    if (!slot.cached.empty() && !resident && !t_.vault->IsSpilled(seq_)) {
      slot.cached.clear();  // a full last tier dropped its spilled copy
    }
    if (slot.cached.empty()) {
      return Done<SlotSaveResult>(
          ctx, reply_,
          FailedPreconditionError(where() + ": the slot holds no tokens")
              .WithReason(kReasonSlotEmpty));
    }
    if (sync_) return JobStep{true, {}};
    if (!resident) {
      // The tier entry is copied on an I/O thread: a slow or hung disk must
      // not stop the scheduler (the slot stays pinned meanwhile).
      StatusOr<std::unique_ptr<RandomAccessFile>> entry =
          t_.vault->OpenSpilledForSave(seq_);
      if (!entry.ok()) {
        return Done<SlotSaveResult>(ctx, reply_,
                                    entry.status().WithContext(where()));
      }
      spilled_ = std::move(entry).value();
      return JobStep{true, {}};
    }
    StatusOr<SaveSnapshot> snapshot = t_.vault->SnapshotForSave(seq_);
    if (!snapshot.ok()) {
      return Done<SlotSaveResult>(ctx, reply_,
                                  snapshot.status().WithContext(where()));
    }
    snapshot_ = std::make_unique<SaveSnapshot>(std::move(snapshot).value());
    t_.vault->SetActive(seq_, true);  // the writer reads its pages
    return JobStep{true, {}};
  }

  Status Io() override {
    const SaveOptions& options = t_.vault->save_options();
    if (snapshot_) {
      written_ = WriteSnapshotToFile(t_.vault->env(), *t_.cache->storage(),
                                     *snapshot_, path_, options);
    } else if (spilled_) {
      written_ = CopyStateFile(*spilled_, t_.vault->env(), path_, options.sync,
                               options.llama_token_header);
    } else {
      written_ = t_.vault->Save(seq_, path_);
    }
    if (written_.ok() && t_.mirror != nullptr) t_.mirror->Upload(path_);
    return written_.status();
  }

  JobStep Resume(JobContext& ctx, const Status&) override {
    Release();
    if (!written_.ok()) {
      return Done<SlotSaveResult>(ctx, reply_,
                                  written_.status().WithContext(where()));
    }
    return Done<SlotSaveResult>(
        ctx, reply_,
        SlotSaveResult{slot_, written_->num_tokens, written_->bytes_written,
                       written_->elapsed_ms});
  }

  void Fail(JobContext& ctx, const Status& error) override {
    Release();
    Deliver(ctx, reply_, StatusOr<SlotSaveResult>(error));
  }
  void TimedOut(JobContext& ctx, const Status& error) override {
    Deliver(ctx, reply_, StatusOr<SlotSaveResult>(error));
  }
  void Late(const Status& io) override {
    Release();
    KV_LOG(WARNING) << where() << " returned after its deadline: " << io;
  }

 private:
  void Release() {
    if (snapshot_) t_.vault->SetActive(seq_, false);
    snapshot_.reset();
    spilled_.reset();
  }

  JobTarget t_;
  uint32_t slot_;
  SeqId seq_;
  std::string path_;
  bool sync_;
  Reply<SlotSaveResult> reply_;
  std::unique_ptr<SaveSnapshot> snapshot_;  // set while the writer may run
  std::unique_ptr<RandomAccessFile> spilled_;  // a spilled slot's tier entry
  StatusOr<SaveResult> written_ = SaveResult{};
};

class RestoreSlotJob final : public SlotJob {
 public:
  RestoreSlotJob(JobTarget t, uint32_t slot, std::string path, bool sync,
                 Reply<SlotRestoreResult> reply)
      : t_(t), slot_(slot), seq_(slot), path_(std::move(path)),
        phase_(sync ? kWhole : kOpen), reply_(std::move(reply)) {}

  JobKind kind() const override { return JobKind::kRestore; }
  std::string where() const override {
    return "restore " + path_ + " into slot " + std::to_string(slot_);
  }
  bool IoInline() const override { return phase_ == kWhole; }
  std::optional<SeqId> scratch() const override { return scratch_; }

  JobStep Start(JobContext&) override {
    if (phase_ != kWhole) {
      t_.vault->SetActive(seq_, true);  // its old KV stays until the commit
      active_ = true;
    }
    return JobStep{true, {}};
  }

  Status Io() override {
    if (t_.mirror != nullptr && phase_ != kLoad) {
      // A name saved on another instance: bring its file here first. When
      // the store lacks it too, the open below reports the missing file.
      Status fetched = t_.mirror->FetchIfMissing(path_);
      if (!fetched.ok() && !fetched.IsNotFound()) {
        KV_LOG(WARNING) << where() << ": shared store: " << fetched;
        // A value that is not a valid slot file (or is too large) is the
        // answer; a store that cannot answer leaves the missing file's.
        if (fetched.code() != StatusCode::kUnavailable) {
          if (phase_ == kWhole) whole_ = fetched;
          return fetched;
        }
      }
    }
    switch (phase_) {
      case kWhole:
        whole_ = t_.vault->Restore(seq_, path_);
        return whole_.status();
      case kOpen: {
        StatusOr<OpenedSlotFile> opened = OpenSlotFile(t_.vault->env(), path_);
        if (opened.ok()) {
          file_ = std::move(opened->state);
          header_bytes_ = opened->header_bytes;
        }
        return opened.status();
      }
      case kLoad:
        return job_->Load();
    }
    return Status::Ok();
  }

  JobStep Resume(JobContext& ctx, const Status& io) override {
    if (phase_ == kWhole) return Finish(ctx, std::move(whole_));
    if (phase_ == kLoad) {
      StatusOr<VaultRestoreResult> restored =
          t_.vault->EndRestore(std::move(job_), io);
      scratch_.reset();
      return Finish(ctx, std::move(restored));
    }
    // Prepare reads only the prefetched header, token table and trailer; a
    // failed open is booked by the vault like any failed restore.
    StatusOr<std::unique_ptr<RandomAccessFile>> opened =
        io.ok() ? StatusOr<std::unique_ptr<RandomAccessFile>>(std::move(file_))
                : StatusOr<std::unique_ptr<RandomAccessFile>>(io);
    StatusOr<std::unique_ptr<RestoreJob>> job =
        t_.vault->BeginRestore(seq_, std::move(opened), path_, ctx.scratch);
    if (!job.ok()) return Finish(ctx, job.status());
    job_ = std::move(job).value();
    scratch_ = ctx.scratch;
    phase_ = kLoad;
    return JobStep{true, {}};
  }

  void Fail(JobContext& ctx, const Status& error) override {
    Abort(error);
    Release();
    Deliver(ctx, reply_, StatusOr<SlotRestoreResult>(error));
  }
  // The target's old KV was never touched: the slot is free at once. The
  // scratch cells stay reserved until Load returns (it writes into them).
  void TimedOut(JobContext& ctx, const Status& error) override {
    Release();
    Deliver(ctx, reply_, StatusOr<SlotRestoreResult>(error));
  }
  void Late(const Status&) override {
    Abort(CancelledError("restore timed out"));
  }

 private:
  enum Phase { kWhole, kOpen, kLoad };

  // Books the restore's end into the slot and answers.
  JobStep Finish(JobContext& ctx, StatusOr<VaultRestoreResult> restored) {
    Release();
    if (!restored.ok()) {
      return Done<SlotRestoreResult>(
          ctx, reply_, RestoreError(restored.status().WithContext(where())));
    }
    // Slots evicted for room keep their token lists: they are spilled now.
    RefreshCached(*t_.cache, *ctx.slot);
    ctx.slot->last_use = ++*ctx.clock;
    SlotRestoreResult result;
    result.slot = slot_;
    result.n_restored = restored->num_tokens;
    result.n_read = restored->bytes_read + header_bytes_;
    result.restore_ms = restored->elapsed_ms;
    result.evicted = std::move(restored->evicted);
    return Done<SlotRestoreResult>(ctx, reply_, std::move(result));
  }
  void Abort(const Status& why) {
    if (job_ != nullptr) (void)t_.vault->EndRestore(std::move(job_), why);
    scratch_.reset();
  }
  void Release() {
    if (active_) t_.vault->SetActive(seq_, false);
    active_ = false;
  }

  JobTarget t_;
  uint32_t slot_;
  SeqId seq_;
  std::string path_;
  Phase phase_;
  Reply<SlotRestoreResult> reply_;
  bool active_ = false;
  StatusOr<VaultRestoreResult> whole_ = VaultRestoreResult{};
  std::unique_ptr<RandomAccessFile> file_;
  uint64_t header_bytes_ = 0;  // the slot file's token header (kOpen)
  std::unique_ptr<RestoreJob> job_;
  std::optional<SeqId> scratch_;
};

// Erase and defrag: done on the scheduler thread at once.
template <typename T>
class InstantJob final : public SlotJob {
 public:
  using Work = std::function<StatusOr<T>(Slot*)>;
  InstantJob(JobKind kind, std::string where, Work work, Reply<T> reply)
      : kind_(kind), where_(std::move(where)), work_(std::move(work)),
        reply_(std::move(reply)) {}

  JobKind kind() const override { return kind_; }
  std::string where() const override { return where_; }
  JobStep Start(JobContext& ctx) override {
    return Done<T>(ctx, reply_, work_(ctx.slot));
  }
  Status Io() override { return Status::Ok(); }
  JobStep Resume(JobContext&, const Status& io) override {
    return JobStep{false, io};
  }
  void Fail(JobContext& ctx, const Status& error) override {
    Deliver(ctx, reply_, StatusOr<T>(error));
  }
  void TimedOut(JobContext& ctx, const Status& error) override {
    Fail(ctx, error);
  }

 private:
  JobKind kind_;
  std::string where_;
  Work work_;
  Reply<T> reply_;
};

}  // namespace

void RefreshCached(const KvCache& cache, Slot& slot) {
  slot.cached.clear();
  bool canonical = true;
  for (const TokenPos& cell : cache.table().Cells(slot.seq)) {
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

std::unique_ptr<SlotJob> NewSaveJob(JobTarget target, uint32_t slot,
                                    std::string path,
                                    Reply<SlotSaveResult> reply) {
  const bool sync = target.cache->MayMoveCellsOnAppend();
  return std::make_unique<SaveJob>(target, slot, std::move(path), sync,
                                   std::move(reply));
}


std::unique_ptr<SlotJob> NewRestoreJob(JobTarget target, uint32_t slot,
                                       std::string path,
                                       Reply<SlotRestoreResult> reply) {
  const bool sync = target.cache->MayMoveCellsOnAppend();
  return std::make_unique<RestoreSlotJob>(target, slot, std::move(path), sync,
                                          std::move(reply));
}

std::unique_ptr<SlotJob> NewEraseJob(JobTarget target, uint32_t slot,
                                     Reply<uint64_t> reply) {
  const std::string where = "erase slot " + std::to_string(slot);
  auto erase = [target, where](Slot* s) -> StatusOr<uint64_t> {
    const uint64_t num_tokens = s->cached.size();
    s->cached.clear();
    KV_RETURN_IF_ERROR(target.vault->Erase(s->seq).WithContext(where));
    return num_tokens;
  };
  return std::make_unique<InstantJob<uint64_t>>(JobKind::kErase, where, erase,
                                                std::move(reply));
}

std::unique_ptr<SlotJob> NewDefragJob(JobTarget target,
                                      Reply<DefragReport> reply) {
  auto defrag = [target](Slot*) -> StatusOr<DefragReport> {
    DefragReport report = target.cache->Defrag();
    KV_LOG(INFO) << "defrag: " << report.num_moves << " moves, "
                 << report.cells_moved << " cells moved in "
                 << report.elapsed_ms << " ms";
    return report;
  };
  return std::make_unique<InstantJob<DefragReport>>(
      JobKind::kDefrag, "defrag", defrag, std::move(reply));
}

std::unique_ptr<SlotJob> NewLookupJob(JobTarget target,
                                      std::vector<TokenId> tokens,
                                      Reply<PrefixLookup> reply) {
  auto lookup = [target, store = target.prefix_store,
                 tokens = std::move(tokens)](Slot*) -> StatusOr<PrefixLookup> {
    PrefixLookup out;
    out.num_tokens = tokens.size();
    const SequenceTable& table = target.cache->table();
    for (SeqId seq : table.SequenceIds()) {
      if (IsScratchSeq(seq)) continue;
      const std::span<const TokenPos> cells = table.Cells(seq);
      uint64_t n = 0;
      while (n < cells.size() && n < tokens.size() &&
             cells[n].token == tokens[n] && cells[n].pos == Pos(n)) {
        ++n;
      }
      if (n > out.pool_tokens) {
        out.pool_tokens = n;
        out.pool_slot = seq.value();  // slot i's sequence is seq i
      }
    }
    if (store != nullptr) {
      std::vector<TokenPos> wanted(tokens.size());
      for (size_t i = 0; i < tokens.size(); ++i) {
        wanted[i] = {tokens[i], static_cast<Pos>(i)};
      }
      const uint32_t page_size = target.cache->pool().page_size();
      const std::vector<uint64_t> held = store->HeldCells(wanted, page_size);
      const PrefixStoreStats stats = store->Stats();
      for (size_t t = 0; t < held.size(); ++t) {
        out.store_tokens.emplace_back(stats.tiers[t].name, held[t]);
      }
    }
    return out;
  };
  return std::make_unique<InstantJob<PrefixLookup>>(
      JobKind::kLookup, "kv lookup", lookup, std::move(reply));
}

}  // namespace kvault
