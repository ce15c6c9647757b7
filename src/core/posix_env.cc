// The POSIX implementation of Env, returned by Env::Default().
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "core/env.h"

namespace kvault {
namespace {

// Writes all of `data`, retrying on EINTR and partial writes.
Status WriteAll(int fd, const std::string& path, const std::byte* data,
                size_t num_bytes) {
  while (num_bytes > 0) {
    const ssize_t n = ::write(fd, data, num_bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path, errno);
    }
    data += n;
    num_bytes -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) (void)Close();  // No one is left to hear the error.
  }

  using WritableFile::Append;
  Status Append(std::span<const std::byte> data) override {
    if (fd_ < 0) return FailedPreconditionError("append to closed " + path_);
    // Small appends are coalesced so that record headers do not each cost a
    // syscall; large ones go straight to the kernel.
    if (data.size() <= kBufferBytes - buffer_.size()) {
      buffer_.insert(buffer_.end(), data.begin(), data.end());
      return Status::Ok();
    }
    KV_RETURN_IF_ERROR(Flush());
    if (data.size() < kBufferBytes) {
      buffer_.assign(data.begin(), data.end());
      return Status::Ok();
    }
    return WriteAll(fd_, path_, data.data(), data.size());
  }

  Status Sync() override {
    if (fd_ < 0) return FailedPreconditionError("sync of closed " + path_);
    KV_RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return ErrnoError("fsync", path_, errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return FailedPreconditionError("close of closed " + path_);
    Status s = Flush();
    // close() is not retried on EINTR: on Linux the descriptor is already
    // released and a retry could close someone else's.
    if (::close(fd_) != 0 && s.ok()) s = ErrnoError("close", path_, errno);
    fd_ = -1;
    return s;
  }

 private:
  static constexpr size_t kBufferBytes = 64 * 1024;

  Status Flush() {
    Status s = WriteAll(fd_, path_, buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }

  const std::string path_;
  int fd_;
  std::vector<std::byte> buffer_;  // [<= kBufferBytes] not yet written
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  StatusOr<size_t> Read(std::span<std::byte> out) override {
    size_t num_read = 0;
    while (num_read < out.size()) {
      const ssize_t n =
          ::read(fd_, out.data() + num_read, out.size() - num_read);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("read", path_, errno);
      }
      if (n == 0) break;
      num_read += static_cast<size_t>(n);
    }
    return num_read;
  }

  Status Skip(uint64_t n) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoError("fstat", path_, errno);
    const off_t pos = ::lseek(fd_, 0, SEEK_CUR);
    if (pos < 0) return ErrnoError("lseek", path_, errno);
    // Clamped to the end so a huge `n` cannot overflow off_t.
    const uint64_t left =
        pos < st.st_size ? static_cast<uint64_t>(st.st_size - pos) : 0;
    const off_t delta = static_cast<off_t>(std::min(n, left));
    if (::lseek(fd_, delta, SEEK_CUR) < 0) {
      return ErrnoError("lseek", path_, errno);
    }
    return Status::Ok();
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    size_t num_read = 0;
    while (num_read < out.size()) {
      const ssize_t n =
          ::pread(fd_, out.data() + num_read, out.size() - num_read,
                  static_cast<off_t>(offset + num_read));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("pread", path_, errno);
      }
      if (n == 0) break;
      num_read += static_cast<size_t>(n);
    }
    return num_read;
  }

  uint64_t size() const override { return size_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

// Opens `path` with `flags`, retrying on EINTR.
StatusOr<int> OpenFd(const std::string& path, int flags, std::string_view op) {
  while (true) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EINTR) return ErrnoError(op, path, errno);
  }
}

// Returns what the file type of `mode` is called in an error message.
const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Insists that `fd` is a regular file, so that a FIFO or device named by a
// client can never block a reader; `*size` gets its size. A directory
// keeps its EISDIR IOError (the in-memory Env reports the same).
Status CheckRegularFile(int fd, const std::string& path, uint64_t* size) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("fstat", path, errno);
  if (S_ISDIR(st.st_mode)) return ErrnoError("open", path, EISDIR);
  if (!S_ISREG(st.st_mode)) {
    return NotRegularFileError(path, FileTypeName(st.st_mode));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

// Opens `path` read-only and insists on a regular file; `*size` gets its
// size. O_NONBLOCK makes opening a FIFO return at once (a blocking open
// waits for a writer forever); O_NOFOLLOW refuses a symbolic link, which
// could point outside the directory the caller checked.
StatusOr<int> OpenRegularForReading(const std::string& path, uint64_t* size) {
  StatusOr<int> opened =
      OpenFd(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, "open for reading");
  if (!opened.ok()) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return NotRegularFileError(path, "a symbolic link");
    }
    return opened.status();
  }
  const int fd = *opened;
  Status s = CheckRegularFile(fd, path, size);
  // Reads of a regular file never block on O_NONBLOCK's account, but the
  // flag is cleared so the descriptor behaves like any other.
  if (s.ok() && ::fcntl(fd, F_SETFL, 0) != 0) {
    s = ErrnoError("fcntl", path, errno);
  }
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

class PosixEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    // O_NOFOLLOW: a symbolic link planted at the name cannot redirect the
    // write elsewhere.
    KV_ASSIGN_OR_RETURN(int fd,
                        OpenFd(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW,
                               "open for writing"));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    uint64_t size = 0;
    KV_ASSIGN_OR_RETURN(int fd, OpenRegularForReading(path, &size));
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    uint64_t size = 0;
    KV_ASSIGN_OR_RETURN(int fd, OpenRegularForReading(path, &size));
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, size));
  }

  bool FileExists(const std::string& path) override {
    return ::access(path.c_str(), F_OK) == 0;
  }

  StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoError("stat", path, errno);
    if (!S_ISREG(st.st_mode)) {
      return FailedPreconditionError(path + " is not a regular file")
          .WithReason(kReasonNotRegularFile);
    }
    return static_cast<uint64_t>(st.st_size);
  }

  StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoError("opendir", dir, errno);
    std::vector<std::string> names;
    errno = 0;
    while (const struct dirent* entry = ::readdir(d)) {
      const std::string_view name(entry->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return ErrnoError("readdir", dir, err);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoError("unlink", path, errno);
    return Status::Ok();
  }

  Status RenameFile(const std::string& src, const std::string& dst) override {
    if (::rename(src.c_str(), dst.c_str()) != 0) {
      return ErrnoError("rename", src + " to " + dst, errno);
    }
    return Status::Ok();
  }

  Status CreateDir(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) == 0) return Status::Ok();
    const int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return Status::Ok();
    }
    return ErrnoError("mkdir", dir, err);
  }

  Status SyncDir(const std::string& dir) override {
    KV_ASSIGN_OR_RETURN(int fd,
                        OpenFd(dir, O_RDONLY | O_DIRECTORY, "open dir"));
    Status s;
    if (::fsync(fd) != 0) s = ErrnoError("fsync dir", dir, errno);
    ::close(fd);
    return s;
  }

  uint64_t NowMicros() override {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv();
  return env;
}

}  // namespace kvault
