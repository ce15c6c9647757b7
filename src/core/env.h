// Env: the seam between kvault and the filesystem (LevelDB-like). Everything
// that touches disk goes through an Env so tests can substitute an in-memory
// FaultInjectingEnv that models crashes and I/O failures.
//
// Durability contract (what a caller must do for data to survive a crash):
// WritableFile::Sync() makes a file's bytes durable; Env::SyncDir(dir) makes
// the creates, renames and removes of entries in `dir` durable. The safe way
// to replace a file is: write "x.tmp", Sync(), Close(), RenameFile("x.tmp",
// "x"), SyncDir(dir).
//
// Paths are plain strings, normalised by the caller ("/a/b", "a/b"): no
// trailing '/', no "." or ".." components, no "//".
#ifndef KVAULT_CORE_ENV_H_
#define KVAULT_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/status_or.h"

namespace kvault {

// A file opened for writing from offset 0. Not thread-safe. Errors of a
// buffered implementation may surface at a later Append, Sync or Close.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends `data` to the end of the file.
  virtual Status Append(std::span<const std::byte> data) = 0;
  // Appends the bytes of `data`; derived classes re-export it with `using`.
  Status Append(std::string_view data);
  // Flushes buffered bytes and makes everything appended so far durable.
  virtual Status Sync() = 0;
  // Flushes buffered bytes and closes; later calls return FailedPrecondition.
  // Closing does not imply Sync().
  virtual Status Close() = 0;
};

// A file read front to back. Not thread-safe.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to out.size() bytes at the current position; returns the number
  // read, 0 only at end of file (or when `out` is empty). May be short.
  virtual StatusOr<size_t> Read(std::span<std::byte> out) = 0;
  // Advances the position by `n` bytes; skipping past the end leaves the
  // position at the end.
  virtual Status Skip(uint64_t n) = 0;
};

// A file read at arbitrary offsets. Thread-safe for concurrent ReadAt.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to out.size() bytes at `offset`; returns the number read, which
  // is short only when the end of file is reached (0 when offset >= size()).
  virtual StatusOr<size_t> ReadAt(uint64_t offset,
                                  std::span<std::byte> out) const = 0;
  // Returns the file size when it was opened.
  virtual uint64_t size() const = 0;
};

// Filesystem operations. Implementations are thread-safe. Failures carry the
// operation and the path; a missing file or directory is NotFound, a full
// disk is ResourceExhausted, anything else is IOError.
class Env {
 public:
  virtual ~Env() = default;

  // Creates `path` (or truncates it if it exists) and opens it for writing;
  // the parent directory must exist.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Opens the existing file `path` for sequential reading. Every reading
  // open refuses (NotRegularFileError) anything but a regular file, a
  // symbolic link included, without blocking.
  virtual StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) = 0;
  // Opens the existing file `path` for positional reading.
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;

  // Returns true when `path` names an existing file or directory.
  virtual bool FileExists(const std::string& path) = 0;
  // Returns the size in bytes of the regular file `path`; FailedPrecondition
  // (reason not_regular_file) for a directory, FIFO, socket or device.
  virtual StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  // Returns the sorted names (not paths) of the entries of directory `dir`,
  // without "." and "..".
  virtual StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) = 0;

  // Removes the file `path` (not a directory).
  virtual Status RemoveFile(const std::string& path) = 0;
  // Renames the file `src` to `dst`, atomically replacing any file at `dst`.
  virtual Status RenameFile(const std::string& src, const std::string& dst) = 0;
  // Creates directory `dir`; OK if it already exists as a directory. The
  // parent must exist.
  virtual Status CreateDir(const std::string& dir) = 0;
  // Makes the entries of `dir` (creates, renames, removes) durable.
  virtual Status SyncDir(const std::string& dir) = 0;

  // Returns microseconds from a monotonic clock with an unspecified epoch.
  virtual uint64_t NowMicros() = 0;

  // Returns the process-wide POSIX Env; never null, never deleted.
  static Env* Default();
};

// Returns the Status for a failed syscall: "<op> <path>: <strerror(err)>";
// NotFound for ENOENT, ResourceExhausted (reason "disk_full") for
// ENOSPC/EDQUOT, else IOError.
Status ErrnoError(std::string_view op, std::string_view path, int err);
// Returns FailedPrecondition "open for reading <path>: <what> (FIFO, device,
// symbolic link...), not a regular file" with reason "not_regular_file".
Status NotRegularFileError(std::string_view path, std::string_view what);
// Writes `data` to `path` (created or truncated) via `env`; when `sync` is
// true the file is synced before it is closed.
Status WriteStringToFile(Env* env, std::string_view data,
                         const std::string& path, bool sync);
// Returns the whole contents of file `path`.
StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);
// Returns the directory part of `path`: "a/b" -> "a", "/a" -> "/", "a" -> ".".
std::string DirName(std::string_view path);
// Returns `dir` + "/" + `name` (no doubled '/' when `dir` is "/").
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace kvault

#endif  // KVAULT_CORE_ENV_H_
