// DiskTier: the disk spill tier. Each entry is a state file
// "<dir>/seq-<id>.kvstate" in the format users save slots in, written
// durably (temp file, fsync, rename, directory fsync), so after a crash an
// entry is either absent, its complete previous version, or complete.
//
// The index lives only in memory and is rebuilt by Open(): it scans the
// directory, removes temporary files a crash left
// ("seq-<id>.kvstate.tmp-*"), and keeps each "seq-<id>.kvstate" whose header
// passes checks 1-10 of the format (valid, same layout, same model). Other
// files are skipped, left on disk and logged. Recovered entries get
// last_use 0, so after a restart the LRU order among them is by sequence id.
// Not thread-safe.
#ifndef KVAULT_KV_DISK_TIER_H_
#define KVAULT_KV_DISK_TIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kv/kv_layout.h"
#include "kv/model_fingerprint.h"
#include "kv/spill_tier.h"

namespace kvault {

// Called after the temporary file of an atomic write is closed, before it is
// renamed into place; an error aborts the write.
using BeforeCommitFn =
    std::function<Status(const std::string& tmp_path, uint64_t num_bytes)>;

// Writes `path` atomically: `write` fills "<path>.tmp-<unique>", which is
// synced (when `sync`), closed, checked by `before_commit` (may be null),
// renamed over `path`, and the directory synced (when `sync`). Returns the
// bytes written. On any error the temporary file is removed (best effort)
// and a previous file at `path` is untouched.
StatusOr<uint64_t> WriteFileAtomically(
    Env* env, const std::string& path, const SpillWriteFn& write, bool sync,
    const BeforeCommitFn& before_commit = {});

// Returns "seq-<id>.kvstate", the name of `seq`'s file in the disk tier.
std::string DiskTierFileName(SeqId seq);
// Parses a DiskTierFileName(); nullopt for any other name.
std::optional<SeqId> ParseDiskTierFileName(const std::string& name);

class DiskTier final : public SpillTier {
 public:
  // Opens the tier in `dir` (created when missing; its parent must exist)
  // and rebuilds the index as described above. `sync` false skips fsyncs
  // (tests and benchmarks; renames stay atomic but not durable).
  static StatusOr<std::unique_ptr<DiskTier>> Open(
      Env* env, const std::string& dir, uint64_t budget_bytes,
      const KvLayout& layout, const ModelFingerprint& fingerprint,
      bool sync = true);

  // Returns "disk".
  std::string_view name() const override { return "disk"; }
  // Returns the budget given to Open().
  uint64_t budget_bytes() const override { return budget_bytes_; }
  // Returns the total size of the indexed files (recovered ones included,
  // which may exceed the budget if it was lowered since they were written).
  uint64_t used_bytes() const override { return used_bytes_; }
  // Returns true when `seq` is indexed.
  bool Contains(SeqId seq) const override;
  // Returns every indexed entry, least recently used first.
  std::vector<SpillEntryInfo> Entries() const override;
  // Writes "seq-<id>.kvstate" atomically, validating the temporary file's
  // header and checking the budget before the rename (see SpillTier::Put).
  StatusOr<SpillEntryInfo> Put(SeqId seq, uint64_t last_use,
                               const SpillWriteFn& write) override;
  // Opens `seq`'s file; NotFound when it is not indexed.
  StatusOr<std::unique_ptr<RandomAccessFile>> Open(SeqId seq) override;
  // Removes `seq`'s file and syncs the directory (when syncing). When only
  // the directory sync fails the entry is gone (the error is returned).
  Status Remove(SeqId seq) override;

  // Returns the directory of the tier.
  const std::string& dir() const { return dir_; }
  // Returns the path of `seq`'s file (whether or not it exists).
  std::string PathOf(SeqId seq) const;

 private:
  DiskTier(Env* env, std::string dir, uint64_t budget_bytes, KvLayout layout,
           ModelFingerprint fingerprint, bool sync);
  // Scans dir_ and fills the index (see the file comment).
  Status Rebuild();
  // Validates one "seq-<id>.kvstate" file; its entry or why it is skipped.
  StatusOr<SpillEntryInfo> Recover(SeqId seq, const std::string& path);

  Env* env_;
  std::string dir_;
  uint64_t budget_bytes_;
  KvLayout layout_;
  ModelFingerprint fingerprint_;
  bool sync_;
  uint64_t used_bytes_ = 0;
  std::map<SeqId, SpillEntryInfo> entries_;
};

}  // namespace kvault

#endif  // KVAULT_KV_DISK_TIER_H_
