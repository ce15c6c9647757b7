#include "core/memory_file.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace kvault {

Status StringWritableFile::Append(std::span<const std::byte> data) {
  if (closed_) return FailedPreconditionError("append to a closed string file");
  out_->append(reinterpret_cast<const char*>(data.data()), data.size());
  return Status::Ok();
}

Status StringWritableFile::Sync() {
  if (closed_) return FailedPreconditionError("sync of a closed string file");
  return Status::Ok();
}

Status StringWritableFile::Close() {
  if (closed_) return FailedPreconditionError("close of a closed string file");
  closed_ = true;
  return Status::Ok();
}

StringRandomAccessFile::StringRandomAccessFile(
    std::shared_ptr<const std::string> data)
    : data_(std::move(data)) {
  KV_CHECK(data_ != nullptr);
}

StatusOr<size_t> StringRandomAccessFile::ReadAt(
    uint64_t offset, std::span<std::byte> out) const {
  if (offset >= data_->size()) return size_t{0};
  size_t n = std::min<uint64_t>(out.size(), data_->size() - offset);
  if (n > 0) std::memcpy(out.data(), data_->data() + offset, n);
  return n;
}

}  // namespace kvault
