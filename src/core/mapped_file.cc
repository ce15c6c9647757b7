#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/env.h"

namespace kvault {

namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

struct Mapping {
  void* base = nullptr;
  size_t bytes = 0;
};

// Maps `fd`'s first `size` bytes read-only.
StatusOr<Mapping> MapFile(int fd, size_t size, const std::string& path) {
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) return ErrnoError("mmap", path, errno);
  return Mapping{base, size};
}

// Reads `fd`'s first `size` bytes into anonymous memory aligned to a huge
// page (so the kernel can back it with huge pages from the first byte),
// then makes it read-only like a mapping.
StatusOr<Mapping> ReadFile(int fd, size_t size, const std::string& path) {
  const size_t bytes = (size + kHugePageBytes - 1) / kHugePageBytes *
                       kHugePageBytes;
  // One huge page of slack to align the start; trimmed below.
  void* raw = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return ErrnoError("mmap (anonymous)", path, errno);
  const uintptr_t raw_addr = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t addr =
      (raw_addr + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (addr > raw_addr) ::munmap(raw, addr - raw_addr);
  const uintptr_t end = raw_addr + bytes + kHugePageBytes;
  if (end > addr + bytes) {
    ::munmap(reinterpret_cast<void*>(addr + bytes), end - (addr + bytes));
  }
  Mapping m{reinterpret_cast<void*>(addr), bytes};
  // Advice only: without huge pages the bytes are still correct.
  (void)::madvise(m.base, m.bytes, MADV_HUGEPAGE);
  char* dst = static_cast<char*>(m.base);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, dst + done, size - done,
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::munmap(m.base, m.bytes);
      if (n == 0) {
        return IOError(path + ": file shrank while being read: expected " +
                       std::to_string(size) + " bytes, got " +
                       std::to_string(done));
      }
      return ErrnoError("read", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::mprotect(m.base, m.bytes, PROT_READ) != 0) {
    const int err = errno;
    ::munmap(m.base, m.bytes);
    return ErrnoError("mprotect", path, err);
  }
  return m;
}

}  // namespace

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                       LoadMode mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError("fstat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("not a regular file: " + path);
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    StatusOr<Mapping> m = mode == LoadMode::kMmap
                              ? MapFile(fd, file->size_, path)
                              : ReadFile(fd, file->size_, path);
    if (!m.ok()) {
      ::close(fd);
      return m.status();
    }
    file->mapping_ = m->base;
    file->mapping_bytes_ = m->bytes;
    file->data_ = static_cast<const std::byte*>(m->base);
  }
  // A mapping keeps the file's pages reachable after the descriptor closes.
  ::close(fd);
  return file;
}

std::unique_ptr<MappedFile> MappedFile::FromBuffer(
    std::shared_ptr<const std::string> bytes) {
  KV_CHECK(bytes != nullptr) << "MappedFile::FromBuffer(nullptr)";
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = "<buffer>";
  file->data_ = reinterpret_cast<const std::byte*>(bytes->data());
  file->size_ = bytes->size();
  file->buffer_ = std::move(bytes);
  return file;
}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

}  // namespace kvault
