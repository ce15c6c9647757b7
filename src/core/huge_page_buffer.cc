#include "core/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace kvault {

StatusOr<HugePageBuffer> HugePageBuffer::Allocate(size_t num_bytes) {
  HugePageBuffer buffer;
  if (num_bytes == 0) return buffer;
  if (num_bytes > SIZE_MAX - 2 * kHugePageBytes) {  // the rounding would wrap
    return ResourceExhaustedError("cannot map " + std::to_string(num_bytes) +
                                  " bytes: too large");
  }
  const size_t mapped =
      (num_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // One huge page of slack to align the start; the unaligned ends are
  // unmapped again right away.
  void* raw = ::mmap(nullptr, mapped + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return ResourceExhaustedError("cannot map " + std::to_string(num_bytes) +
                                  " bytes: " + std::strerror(errno));
  }
  const uintptr_t raw_begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t begin =
      (raw_begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t raw_end = raw_begin + mapped + kHugePageBytes;
  if (begin > raw_begin) ::munmap(raw, begin - raw_begin);
  if (raw_end > begin + mapped) {
    ::munmap(reinterpret_cast<void*>(begin + mapped), raw_end - begin - mapped);
  }
  buffer.data_ = reinterpret_cast<std::byte*>(begin);
  buffer.size_ = num_bytes;
  buffer.mapped_bytes_ = mapped;
  // Advice only: on 4 KiB pages the memory works the same, slower.
  (void)::madvise(buffer.data_, mapped, MADV_HUGEPAGE);
  return buffer;
}

HugePageBuffer::~HugePageBuffer() { Release(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

Status HugePageBuffer::MakeReadOnly() {
  if (data_ == nullptr) return Status::Ok();
  if (::mprotect(data_, mapped_bytes_, PROT_READ) != 0) {
    return IOError(std::string("mprotect: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status HugePageBuffer::MakeWritable() {
  if (data_ == nullptr) return Status::Ok();
  if (::mprotect(data_, mapped_bytes_, PROT_READ | PROT_WRITE) != 0) {
    return IOError(std::string("mprotect: ") + std::strerror(errno));
  }
  return Status::Ok();
}

void HugePageBuffer::Release() {
  if (data_ != nullptr) ::munmap(data_, mapped_bytes_);
  data_ = nullptr;
  size_ = 0;
  mapped_bytes_ = 0;
}

}  // namespace kvault
