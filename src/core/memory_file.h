// In-memory file adapters: let code written against WritableFile and
// RandomAccessFile (the state-file writer and reader) target a byte string,
// e.g. the host-RAM spill tier and the fuzzer.
#ifndef KVAULT_CORE_MEMORY_FILE_H_
#define KVAULT_CORE_MEMORY_FILE_H_

#include <memory>
#include <string>

#include "core/env.h"

namespace kvault {

// Appends to a caller-owned string. Sync() is a no-op that succeeds; after
// Close() every call returns FailedPrecondition.
class StringWritableFile final : public WritableFile {
 public:
  // Appends to *out, which must outlive this object.
  explicit StringWritableFile(std::string* out) : out_(out) {}
  using WritableFile::Append;
  // Appends `data` to the string.
  Status Append(std::span<const std::byte> data) override;
  // Succeeds while open.
  Status Sync() override;
  // Closes; the string keeps its bytes.
  Status Close() override;

 private:
  std::string* out_;
  bool closed_ = false;
};

// Reads from shared immutable bytes, so a reader can outlive a tier entry
// that is removed while it reads.
class StringRandomAccessFile final : public RandomAccessFile {
 public:
  // Reads `data` (not null).
  explicit StringRandomAccessFile(std::shared_ptr<const std::string> data);
  // Copies up to out.size() bytes from `offset`; short only at the end.
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override;
  // Returns the byte count.
  uint64_t size() const override { return data_->size(); }

 private:
  std::shared_ptr<const std::string> data_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_MEMORY_FILE_H_
