#include "kv/prefetched_file.h"

#include <algorithm>
#include <cstring>

#include "kv/state_format.h"

namespace kvault {

StatusOr<std::unique_ptr<RandomAccessFile>> PrefetchedFile::Open(
    Env* env, const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> base,
                      env->NewRandomAccessFile(path));
  return Wrap(std::move(base));
}

StatusOr<std::unique_ptr<RandomAccessFile>> PrefetchedFile::Wrap(
    std::unique_ptr<RandomAccessFile> base) {
  const uint64_t size = base->size();
  std::unique_ptr<PrefetchedFile> file(new PrefetchedFile(std::move(base)));
  KV_RETURN_IF_ERROR(
      file->Fill(0, std::min(size, kStateHeaderBytes), &file->head_));
  if (file->head_.size() == kStateHeaderBytes) {
    // A garbage count is clamped to the file: Prepare rejects it later.
    const uint64_t num_tokens = std::min<uint64_t>(
        LoadLe64(reinterpret_cast<const std::byte*>(file->head_.data()) + 88),
        size / kStateTokenRecordBytes);
    const uint64_t head_bytes = std::min<uint64_t>(
        size, kStateHeaderBytes + num_tokens * kStateTokenRecordBytes + 8);
    KV_RETURN_IF_ERROR(file->Fill(0, head_bytes, &file->head_));
  }
  file->tail_offset_ = size - std::min(size, kStateTrailerBytes);
  KV_RETURN_IF_ERROR(
      file->Fill(file->tail_offset_, size - file->tail_offset_, &file->tail_));
  return std::unique_ptr<RandomAccessFile>(std::move(file));
}

Status PrefetchedFile::Fill(uint64_t offset, uint64_t n, std::string* out) {
  out->resize(n);
  StatusOr<size_t> got = base_->ReadAt(
      offset, std::as_writable_bytes(std::span<char>(out->data(), n)));
  if (!got.ok()) return got.status();
  out->resize(*got);  // short: the file shrank; Prepare reports truncation
  return Status::Ok();
}

StatusOr<size_t> PrefetchedFile::ReadAt(uint64_t offset,
                                        std::span<std::byte> out) const {
  const uint64_t end = offset + out.size();
  if (end <= head_.size()) {
    std::memcpy(out.data(), head_.data() + offset, out.size());
    return out.size();
  }
  if (offset >= tail_offset_ && end <= tail_offset_ + tail_.size()) {
    std::memcpy(out.data(), tail_.data() + (offset - tail_offset_), out.size());
    return out.size();
  }
  return base_->ReadAt(offset, out);
}

}  // namespace kvault
