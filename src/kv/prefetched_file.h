// PrefetchedFile: a state file whose header, token table and trailer were
// read up front, so that RestoreJob::Prepare (checks 1-11, on the thread
// that owns the cache) reads only memory and can never block on a slow or
// hung filesystem; the chunks (RestoreJob::Load, on an I/O thread) are
// read from the wrapped file.
#ifndef KVAULT_KV_PREFETCHED_FILE_H_
#define KVAULT_KV_PREFETCHED_FILE_H_

#include <memory>
#include <string>

#include "core/env.h"
#include "core/status_or.h"

namespace kvault {

class PrefetchedFile final : public RandomAccessFile {
 public:
  // Opens `path` with `env` and reads its first 128 + 8 * num_tokens + 8
  // bytes (num_tokens from the header's bytes 88-96, clamped to the file)
  // and its last 24. I/O errors keep their code and gain the path; a file
  // too short for a state file is read whole (Prepare reports it).
  static StatusOr<std::unique_ptr<RandomAccessFile>> Open(
      Env* env, const std::string& path);
  // As Open, over an opened file (I/O errors keep their code).
  static StatusOr<std::unique_ptr<RandomAccessFile>> Wrap(
      std::unique_ptr<RandomAccessFile> base);
  // Serves reads inside the prefetched ranges from memory, others from the
  // wrapped file.
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override;
  // Returns the wrapped file's size.
  uint64_t size() const override { return base_->size(); }

 private:
  explicit PrefetchedFile(std::unique_ptr<RandomAccessFile> base)
      : base_(std::move(base)) {}
  // Reads [offset, offset + n) of the wrapped file into `*out`.
  Status Fill(uint64_t offset, uint64_t n, std::string* out);

  std::unique_ptr<RandomAccessFile> base_;
  std::string head_;          // bytes [0, head_.size())
  std::string tail_;          // bytes [tail_offset_, size())
  uint64_t tail_offset_ = 0;
};

}  // namespace kvault

#endif  // KVAULT_KV_PREFETCHED_FILE_H_
