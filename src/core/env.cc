#include "core/env.h"

#include <cerrno>
#include <system_error>
#include <utility>
#include <vector>

namespace kvault {

Status WritableFile::Append(std::string_view data) {
  return Append(std::as_bytes(std::span<const char>(data.data(), data.size())));
}

Status ErrnoError(std::string_view op, std::string_view path, int err) {
  std::string msg(op);
  msg += " ";
  msg += path;
  msg += ": ";
  msg += std::generic_category().message(err);
  switch (err) {
    case ENOENT:
      return NotFoundError(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(msg)).WithReason(kReasonDiskFull);
    default:
      return IOError(std::move(msg));
  }
}

Status NotRegularFileError(std::string_view path, std::string_view what) {
  std::string msg = "open for reading ";
  msg += path;
  msg += ": ";
  msg += what;
  if (what != "not a regular file") msg += ", not a regular file";
  return FailedPreconditionError(std::move(msg))
      .WithReason(kReasonNotRegularFile);
}

Status WriteStringToFile(Env* env, std::string_view data,
                         const std::string& path, bool sync) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                      env->NewWritableFile(path));
  Status s = file->Append(data);
  if (s.ok() && sync) s = file->Sync();
  // Close even after a failure so the handle is released; report the first
  // error.
  Status close_status = file->Close();
  if (!s.ok()) return s;
  return close_status;
}

StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file,
                      env->NewSequentialFile(path));
  std::string contents;
  constexpr size_t kChunkBytes = 64 * 1024;
  std::vector<std::byte> buffer(kChunkBytes);
  while (true) {
    KV_ASSIGN_OR_RETURN(size_t num_read, file->Read(buffer));
    if (num_read == 0) break;
    contents.append(reinterpret_cast<const char*>(buffer.data()), num_read);
  }
  return contents;
}

std::string DirName(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

}  // namespace kvault
