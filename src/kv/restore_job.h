// Slot I/O that runs off the thread that owns the cache.
//
// A restore is split in three phases so that the file I/O (the slow part)
// runs on an I/O thread while the owner keeps decoding other sequences:
//
//   RestoreJob::Prepare  owner thread: checks 1-11 of
//                        docs/state_file_format.md (header, size, trailer,
//                        token table) and reserves the cells under a scratch
//                        sequence (asking make_room once when short).
//   RestoreJob::Load     any one thread, once: reads every chunk into the
//                        reserved cells and verifies it (checks 12-13),
//                        with RestoreOptions::num_threads threads.
//                        It touches only the file and those cells' bytes
//                        (the page list it writes was copied by Prepare), so
//                        the owner may use the table meanwhile.
//   Commit / Abort       owner thread: ReplaceSequence(target, scratch), or
//                        drop the scratch sequence. A failed or aborted
//                        restore leaves the cache as it was before Prepare.
//
// When even make_room leaves no room beside the target's old cells but its
// own pages would hold the file (RestoreOptions::reuse_target_pages),
// Prepare reserves nothing; Load reads and verifies the whole K/V payload
// into a host buffer (the restored sequence's size), and Commit re-checks
// the room, releases the target's old cells and copies the buffer in. Every
// failure (a bad chunk, an I/O error, a pool that filled up meanwhile)
// happens before the old cells are released, so the target is unchanged.
//
// RestoreSequence is exactly Prepare + Load + Commit (Abort on error).
// Thread hand-off: the owner must see Load's return (a future, a queue with
// a mutex) before Commit; Abort may also come before Load starts (Load then
// returns Cancelled and touches nothing), but not while it runs (checked).
//
// Each job in flight needs its own scratch id (IsScratchSeq; engines take
// ids in [kFirstScratchSeq, kPrefixLoadSeq), RestoreSequence uses
// kRestoreScratchSeq). While a job is between Prepare and Commit/Abort the
// owner must not move or free the scratch cells: no Defrag, no Append under
// contiguous+defrag (its retry defragments; Prepare itself refuses to
// trigger that while another scratch sequence exists), no
// RemoveSequence/KeepOnly/Clear touching the scratch sequence. Appends of
// other sequences under paged or contiguous placement are fine: they never
// move existing cells. Commit verifies the scratch page list is unchanged.
//
// A save is split the same way: TakeSaveSnapshot (owner thread) copies the
// sequence's token table and page list; WriteSnapshotToFile (any thread)
// streams the K/V bytes from storage into an atomic file. The owner must
// keep the sequence's cells unchanged (not appended to, moved, freed,
// evicted or replaced by a restore) until the write returns.
#ifndef KVAULT_KV_RESTORE_JOB_H_
#define KVAULT_KV_RESTORE_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/model_fingerprint.h"
#include "kv/state_file.h"

namespace kvault {

class RestoreJob {
 public:
  // Owner thread. Validates `file` against `fingerprint` and the cache's
  // layout and reserves its cells under `scratch` (IsScratchSeq, not in
  // the cache; InvalidArgument / FailedPrecondition otherwise). Errors as
  // RestoreSequence; nothing reserved then.
  static StatusOr<std::unique_ptr<RestoreJob>> Prepare(
      std::unique_ptr<RandomAccessFile> file,
      const ModelFingerprint& fingerprint, KvCache* cache, SeqId target,
      SeqId scratch, const RestoreOptions& options = {});
  // Precondition: committed or aborted (checked), Load not running.
  ~RestoreJob();
  RestoreJob(const RestoreJob&) = delete;
  RestoreJob& operator=(const RestoreJob&) = delete;

  // Any thread, at most once. Reads and scatters the chunks; Corruption or
  // IOError as RestoreSequence. Commit after a failed Load is refused.
  // A second call, or a call after Abort/Commit, returns FailedPrecondition
  // / Cancelled and touches nothing.
  Status Load();
  // Owner thread, after a successful Load: makes the restored cells the
  // target's (dropping its old ones). Returns tokens, bytes, elapsed ms
  // since Prepare. On any error (Load not run or failed: FailedPrecondition;
  // scratch cells changed: Internal; reusing the target's pages and other
  // sequences took the free ones meanwhile: ResourceExhausted) the job is
  // aborted: the cache is as before Prepare, and the job is finished either
  // way.
  StatusOr<RestoreResult> Commit();
  // Owner thread: drops the scratch cells; the cache is as before Prepare.
  // A no-op on a finished (committed or aborted) job.
  void Abort();

  // Returns the tokens the file holds (known after Prepare).
  uint64_t num_tokens() const;
  // Returns the target sequence.
  SeqId target() const { return target_; }
  // Returns the scratch sequence the cells are reserved under.
  SeqId scratch() const;
  // Returns true once committed or aborted.
  bool finished() const;

 private:
  struct State;
  RestoreJob(std::unique_ptr<State> state, SeqId target);
  // Load's two placements: read each chunk straight into the reserved
  // cells, or the whole payload into the host buffer.
  Status LoadIntoCells();
  Status LoadIntoBuffer();
  // Commit's two placements; on error the target is as before Prepare.
  Status CommitReserved(const std::string& where);
  Status CommitIntoTargetPages(const std::string& where);
  std::unique_ptr<State> state_;
  SeqId target_;
};

// What a save needs from the owner thread, copied.
struct SaveSnapshot {
  ModelFingerprint fingerprint;
  KvLayout layout;
  uint32_t page_size = 0;
  std::vector<TokenPos> tokens;  // in logical order
  std::vector<PageId> pages;     // the sequence's pages, in logical order
  SeqId seq;                     // the saved sequence, for messages
};

// Owner thread: copies `seq`'s token table and pages. NotFound for an
// unknown sequence; FailedPrecondition for a cache without K/V data.
StatusOr<SaveSnapshot> TakeSaveSnapshot(const KvCache& cache, SeqId seq,
                                        const ModelFingerprint& fingerprint);

// Any thread: streams the snapshot's state file to `out` (appended; neither
// synced nor closed), reading K/V from `storage`; returns the bytes
// written. InvalidArgument as WriteSnapshotToFile.
StatusOr<uint64_t> WriteSnapshot(const KvStorage& storage,
                                 const SaveSnapshot& snap,
                                 const SaveOptions& options,
                                 WritableFile* out);

// Any thread: writes the snapshot's state file to `path` exactly as
// SaveSequenceToFile does (atomic, durable per options; the same bytes and
// errors), reading K/V from `storage`. InvalidArgument when the snapshot
// does not fit `storage` (layout, page bounds, too few pages).
StatusOr<SaveResult> WriteSnapshotToFile(Env* env, const KvStorage& storage,
                                         const SaveSnapshot& snapshot,
                                         const std::string& path,
                                         const SaveOptions& options = {});

}  // namespace kvault

#endif  // KVAULT_KV_RESTORE_JOB_H_
