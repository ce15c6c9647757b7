#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/check.h"
#include "core/env.h"

namespace kvault {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(
    const std::string& path) {
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
    void* base = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("mmap", path, err);
    }
    file->mapping_ = base;
    file->data_ = static_cast<const std::byte*>(base);
  }
  // The mapping keeps the file's pages reachable after the descriptor closes.
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
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace kvault
