#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"

namespace kvault {

namespace {

// Reads `fd`'s first `size` bytes into `dst`.
// Reads of at most this many bytes, so a large file's read can report
// progress between them.
constexpr size_t kReadChunkBytes = size_t{64} << 20;
// Files from this size on log their read progress (a model of several GiB
// takes seconds to read).
constexpr size_t kProgressMinBytes = size_t{256} << 20;

Status ReadAll(int fd, size_t size, const std::string& path, std::byte* dst) {
  size_t done = 0;
  size_t next_report = kReadChunkBytes * 4;
  while (done < size) {
    if (size >= kProgressMinBytes && done >= next_report) {
      KV_LOG(INFO) << "reading " << path << ": " << (done >> 20) << " / "
                   << (size >> 20) << " MiB (" << done * 100 / size << "%)";
      next_report += kReadChunkBytes * 4;
    }
    const size_t want = std::min(size - done, kReadChunkBytes);
    const ssize_t n = ::pread(fd, dst + done, want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read", path, errno);
    if (n == 0) {
      return IOError(path + ": file shrank while being read: expected " +
                     std::to_string(size) + " bytes, got " +
                     std::to_string(done));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
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
  Status loaded = Status::Ok();
  if (file->size_ > 0 && mode == LoadMode::kMmap) {
    void* base = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      loaded = ErrnoError("mmap", path, errno);
    } else {
      file->mapping_ = base;
      file->data_ = static_cast<const std::byte*>(base);
    }
  } else if (file->size_ > 0) {
    loaded = file->ReadInto(fd);
  }
  if (!loaded.ok()) {
    ::close(fd);
    return loaded;
  }
  // A mapping keeps the file's pages reachable after the descriptor closes.
  ::close(fd);
  return file;
}

Status MappedFile::ReadInto(int fd) {
  StatusOr<HugePageBuffer> buffer = HugePageBuffer::Allocate(size_);
  if (!buffer.ok()) return buffer.status().WithContext(path_);
  KV_RETURN_IF_ERROR(ReadAll(fd, size_, path_, buffer->data()));
  KV_RETURN_IF_ERROR(buffer->MakeReadOnly());
  data_ = buffer->data();
  read_ = std::move(*buffer);
  return Status::Ok();
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

StatusOr<bool> MappedFile::RewriteInPlace(
    const std::function<void(std::span<std::byte>)>& rewrite) {
  if (read_.data() == nullptr) return false;
  KV_RETURN_IF_ERROR(read_.MakeWritable());
  rewrite(std::span<std::byte>(read_.data(), size_));
  KV_RETURN_IF_ERROR(read_.MakeReadOnly());
  return true;
}

}  // namespace kvault
