// MappedFile: a view of a whole file's bytes: memory-mapped from disk
// (read-only), read into private memory, or borrowed from a shared
// in-memory buffer (tests, fuzzers). Either way bytes() stays valid for the
// object's lifetime; only the owner of a privately read file may rewrite
// them, through RewriteInPlace(), before it shares them.
#ifndef KVAULT_CORE_MAPPED_FILE_H_
#define KVAULT_CORE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/huge_page_buffer.h"
#include "core/status_or.h"

namespace kvault {

// How Open brings a file's bytes into memory.
enum class LoadMode {
  // Map the file: instant, and the bytes stay shared with the page cache.
  kMmap,
  // Read the file into private memory on transparent huge pages (where the
  // kernel grants them): costs a copy and the memory, but each TLB entry
  // then covers 2 MiB instead of 4 KiB, which speeds up streaming the bytes
  // (a decode step reads every weight once; see docs/benchmark-log.md,
  // 2026-12-03 17:00 UTC).
  kRead,
};

class MappedFile {
 public:
  // Opens the regular file `path` as `mode` says. NotFound when it does not
  // exist, InvalidArgument when it is not a regular file, IOError for other
  // failures (and for a file that shrinks while kRead reads it); messages
  // name the path. An empty file gives empty bytes.
  static StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path, LoadMode mode = LoadMode::kMmap);
  // Wraps `bytes` (must not be null), sharing ownership of the buffer.
  static std::unique_ptr<MappedFile> FromBuffer(
      std::shared_ptr<const std::string> bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Returns the file's bytes.
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // For privately read bytes (LoadMode::kRead): makes them writable, calls
  // `rewrite` with them, makes them read-only again and returns true.
  // Otherwise calls nothing and returns false. IOError when the protection
  // cannot change.
  StatusOr<bool> RewriteInPlace(
      const std::function<void(std::span<std::byte>)>& rewrite);
  // Returns the file size in bytes.
  uint64_t size() const { return size_; }
  // Returns the path given to Open ("<buffer>" for FromBuffer).
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  // Reads the whole file from `fd` into read_ (LoadMode::kRead).
  Status ReadInto(int fd);

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // mmap base (kMmap), else null
  HugePageBuffer read_;      // the bytes (kRead), else empty
  std::shared_ptr<const std::string> buffer_;
  std::string path_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_MAPPED_FILE_H_
