// FaultInjectingEnv: an in-memory Env for tests that models durability and
// injects I/O failures. It touches no real disk.
//
// Durability model (deliberately simple and pessimistic):
//  - A file is an inode with *current* bytes and *durable* bytes.
//    WritableFile::Sync() copies current to durable for that inode.
//    Truncation by NewWritableFile() is not durable until Sync() either.
//  - The namespace (which name maps to which inode, which directories exist)
//    also has a current and a durable version. SyncDir(dir) copies the
//    current entries whose parent is `dir` (files and subdirectories) into
//    the durable namespace, dropping durable entries of `dir` that are gone.
//  - SimulateCrash() replaces the current namespace with the durable one,
//    drops entries whose parent directory did not durably exist, and reverts
//    every surviving inode to its durable bytes. So: a file created but whose
//    directory was never synced disappears; a rename or remove not followed
//    by SyncDir is undone; unsynced bytes are lost. Handles opened before the
//    crash fail with IOError afterwards.
//  - A rename across directories synced in only one of them can leave the
//    inode reachable under both names after a crash (like a hard link).
//
// Faults: each FailNth*(n, spec) arms a fault for the n-th (1-based) call of
// that kind counted from now; the counters (num_appends() ...) count every
// call ever made, so a test can run a workload once to count its appends and
// then rerun it failing append N for every N. A failed call changes nothing
// (except the partial bytes of a short write). "Always fail" is
// FailNth*(1, {.sticky = true}).
//
// Directories may not be renamed or removed. GetFileSize() of a directory is
// an error (POSIX reports the directory's size). Thread-safe; the env must
// outlive the file handles it returns.
#ifndef KVAULT_CORE_FAULT_INJECTING_ENV_H_
#define KVAULT_CORE_FAULT_INJECTING_ENV_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/env.h"
#include "core/mutex.h"

namespace kvault {

// Which errno an injected fault imitates.
enum class FaultKind {
  kIOError,  // EIO -> StatusCode::kIOError
  kNoSpace,  // ENOSPC -> StatusCode::kResourceExhausted
};

// How an armed fault behaves.
struct FaultSpec {
  FaultKind kind = FaultKind::kIOError;
  // When true the n-th call and every later call of the kind fail until
  // ClearFaults(); when false only the n-th call fails.
  bool sticky = false;
  // FailNthWrite only: how many leading bytes of the failing Append reach the
  // file before it fails (a short write); clamped to the Append's size.
  // Later Appends failed by a sticky fault write nothing.
  size_t num_partial_bytes = 0;
};

class FaultInjectingEnv final : public Env {
 public:
  // Starts with an empty filesystem holding only the directories "/" and ".".
  FaultInjectingEnv();
  ~FaultInjectingEnv() override;
  FaultInjectingEnv(const FaultInjectingEnv&) = delete;
  FaultInjectingEnv& operator=(const FaultInjectingEnv&) = delete;

  // The Env operations follow env.h; the deviations from POSIX are listed
  // at the top of this file.
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override;
  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override;
  bool FileExists(const std::string& path) override;
  StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override;
  Status RemoveFile(const std::string& path) override;
  Status RenameFile(const std::string& src, const std::string& dst) override;
  Status CreateDir(const std::string& dir) override;
  Status SyncDir(const std::string& dir) override;
  // Returns a fake clock: 0 at construction, moved only by AdvanceMicros().
  uint64_t NowMicros() override;

  // Moves the fake clock forward by `micros`.
  void AdvanceMicros(uint64_t micros);

  // Drops everything not durable, as a power loss would (see the model).
  void SimulateCrash();

  // Fails the n-th WritableFile::Append from now (n >= 1).
  void FailNthWrite(uint64_t n, FaultSpec spec = {}) {
    Arm(Op::kAppend, n, spec);
  }
  // Fails the n-th WritableFile::Sync from now; the data stays non-durable.
  void FailNthSync(uint64_t n, FaultSpec spec = {}) { Arm(Op::kSync, n, spec); }
  // Fails the n-th SyncDir from now; no entry becomes durable.
  void FailNthSyncDir(uint64_t n, FaultSpec spec = {}) {
    Arm(Op::kSyncDir, n, spec);
  }
  // Fails the n-th RenameFile from now; both names stay as they were.
  void FailNthRename(uint64_t n, FaultSpec spec = {}) {
    Arm(Op::kRename, n, spec);
  }
  // Fails the n-th SequentialFile::Read or RandomAccessFile::ReadAt from now.
  void FailNthRead(uint64_t n, FaultSpec spec = {}) { Arm(Op::kRead, n, spec); }
  // Disarms every fault; counters keep counting.
  void ClearFaults();

  // Returns the number of Append calls so far (failed ones included).
  uint64_t num_appends() const { return CountOf(Op::kAppend); }
  // Returns the number of WritableFile::Sync calls so far.
  uint64_t num_syncs() const { return CountOf(Op::kSync); }
  // Returns the number of SyncDir calls so far.
  uint64_t num_dir_syncs() const { return CountOf(Op::kSyncDir); }
  // Returns the number of RenameFile calls so far.
  uint64_t num_renames() const { return CountOf(Op::kRename); }
  // Returns the number of Read and ReadAt calls so far.
  uint64_t num_reads() const { return CountOf(Op::kRead); }

 private:
  class MemWritableFile;
  class MemSequentialFile;
  class MemRandomAccessFile;

  struct Inode {
    std::string contents;  // what reads see now
    std::string durable;   // what survives SimulateCrash()
  };
  struct Namespace {
    std::map<std::string, std::shared_ptr<Inode>> files;  // path -> inode
    std::set<std::string> dirs;                           // paths
  };
  enum class Op { kAppend, kSync, kSyncDir, kRename, kRead, kNumOps };
  struct Trigger {
    bool armed = false;
    uint64_t fail_at = 0;  // value of the op's counter that fails
    FaultSpec spec;
  };

  uint64_t CountOf(Op op) const EXCLUDES(mu_);
  void Arm(Op op, uint64_t n, const FaultSpec& spec) EXCLUDES(mu_);
  // Counts one call of `op`; returns the armed spec if this call must fail.
  const FaultSpec* Tick(Op op) REQUIRES(mu_);
  // Returns 0 when the parent of `path` is a directory, else the errno
  // (ENOENT, ENOTDIR) a syscall would report.
  int ParentErrno(const std::string& path) const REQUIRES(mu_);
  // Returns OK when the parent of `path` is a directory.
  Status CheckParent(std::string_view op, const std::string& path) const
      REQUIRES(mu_);
  // Returns the inode of the regular file `path`, or the error `op` on it
  // would get.
  StatusOr<std::shared_ptr<Inode>> FindFile(std::string_view op,
                                            const std::string& path) const
      REQUIRES(mu_);
  // Returns OK when a handle of crash generation `epoch` may still be used.
  Status CheckEpoch(uint64_t epoch, const std::string& path) const
      REQUIRES(mu_);
  static void PruneOrphans(Namespace& ns);

  // Entry points of the file handles.
  Status FileAppend(const MemWritableFile& file,
                    std::span<const std::byte> data);
  Status FileSync(const MemWritableFile& file);
  StatusOr<size_t> FileRead(uint64_t epoch, const std::string& path,
                            const Inode& inode, uint64_t offset,
                            std::span<std::byte> out);

  // Guards the namespaces, the counters and triggers, and the contents of
  // every Inode (which handles share).
  mutable Mutex mu_;
  Namespace current_ GUARDED_BY(mu_);
  Namespace durable_ GUARDED_BY(mu_);
  // Bumped by SimulateCrash() to orphan old handles.
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  std::array<uint64_t, static_cast<size_t>(Op::kNumOps)> counts_
      GUARDED_BY(mu_){};
  std::array<Trigger, static_cast<size_t>(Op::kNumOps)> triggers_
      GUARDED_BY(mu_){};
  std::atomic<uint64_t> now_micros_{0};
};

}  // namespace kvault

#endif  // KVAULT_CORE_FAULT_INJECTING_ENV_H_
