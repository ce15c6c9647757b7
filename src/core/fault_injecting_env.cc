#include "core/fault_injecting_env.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace kvault {
namespace {

Status InjectedFault(const FaultSpec& spec, std::string_view op,
                     std::string_view path) {
  std::string what = "injected fault: ";
  what += op;
  return ErrnoError(what, path,
                    spec.kind == FaultKind::kNoSpace ? ENOSPC : EIO);
}

// Returns the last component of `path` ("a/b" -> "b", "a" -> "a").
std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsRoot(const std::string& path) { return path == "/" || path == "."; }

}  // namespace

class FaultInjectingEnv::MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(FaultInjectingEnv* env, std::string path,
                  std::shared_ptr<Inode> inode, uint64_t epoch)
      : env_(env),
        path_(std::move(path)),
        inode_(std::move(inode)),
        epoch_(epoch) {}

  using WritableFile::Append;
  Status Append(std::span<const std::byte> data) override {
    if (closed_) return FailedPreconditionError("append to closed " + path_);
    return env_->FileAppend(*this, data);
  }
  Status Sync() override {
    if (closed_) return FailedPreconditionError("sync of closed " + path_);
    return env_->FileSync(*this);
  }
  Status Close() override {
    if (closed_) return FailedPreconditionError("close of closed " + path_);
    closed_ = true;
    return Status::Ok();
  }

 private:
  friend class FaultInjectingEnv;
  FaultInjectingEnv* const env_;
  const std::string path_;
  const std::shared_ptr<Inode> inode_;
  const uint64_t epoch_;
  bool closed_ = false;
};

class FaultInjectingEnv::MemSequentialFile final : public SequentialFile {
 public:
  MemSequentialFile(FaultInjectingEnv* env, std::string path,
                    std::shared_ptr<const Inode> inode, uint64_t epoch)
      : env_(env),
        path_(std::move(path)),
        inode_(std::move(inode)),
        epoch_(epoch) {}

  StatusOr<size_t> Read(std::span<std::byte> out) override {
    KV_ASSIGN_OR_RETURN(size_t n,
                        env_->FileRead(epoch_, path_, *inode_, pos_, out));
    pos_ += n;
    return n;
  }
  Status Skip(uint64_t n) override {
    MutexLock lock(&env_->mu_);
    KV_RETURN_IF_ERROR(env_->CheckEpoch(epoch_, path_));
    const uint64_t size = inode_->contents.size();
    pos_ += std::min(n, size - std::min(pos_, size));
    return Status::Ok();
  }

 private:
  FaultInjectingEnv* const env_;
  const std::string path_;
  const std::shared_ptr<const Inode> inode_;
  const uint64_t epoch_;
  uint64_t pos_ = 0;
};

class FaultInjectingEnv::MemRandomAccessFile final : public RandomAccessFile {
 public:
  MemRandomAccessFile(FaultInjectingEnv* env, std::string path,
                      std::shared_ptr<const Inode> inode, uint64_t epoch,
                      uint64_t size)
      : env_(env),
        path_(std::move(path)),
        inode_(std::move(inode)),
        epoch_(epoch),
        size_(size) {}

  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    return env_->FileRead(epoch_, path_, *inode_, offset, out);
  }
  uint64_t size() const override { return size_; }

 private:
  FaultInjectingEnv* const env_;
  const std::string path_;
  const std::shared_ptr<const Inode> inode_;
  const uint64_t epoch_;
  const uint64_t size_;
};

FaultInjectingEnv::FaultInjectingEnv() {
  current_.dirs = {"/", "."};
  durable_.dirs = current_.dirs;
}

FaultInjectingEnv::~FaultInjectingEnv() = default;

StatusOr<std::unique_ptr<WritableFile>> FaultInjectingEnv::NewWritableFile(
    const std::string& path) {
  constexpr std::string_view kOp = "open for writing";
  MutexLock lock(&mu_);
  if (current_.dirs.contains(path)) return ErrnoError(kOp, path, EISDIR);
  KV_RETURN_IF_ERROR(CheckParent(kOp, path));
  std::shared_ptr<Inode>& inode = current_.files[path];
  if (inode) {
    inode->contents.clear();
  } else {
    inode = std::make_shared<Inode>();
  }
  return std::unique_ptr<WritableFile>(
      new MemWritableFile(this, path, inode, epoch_));
}

StatusOr<std::unique_ptr<SequentialFile>> FaultInjectingEnv::NewSequentialFile(
    const std::string& path) {
  MutexLock lock(&mu_);
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                      FindFile("open for reading", path));
  return std::unique_ptr<SequentialFile>(
      new MemSequentialFile(this, path, std::move(inode), epoch_));
}

StatusOr<std::unique_ptr<RandomAccessFile>>
FaultInjectingEnv::NewRandomAccessFile(const std::string& path) {
  MutexLock lock(&mu_);
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                      FindFile("open for reading", path));
  const uint64_t size = inode->contents.size();
  return std::unique_ptr<RandomAccessFile>(
      new MemRandomAccessFile(this, path, std::move(inode), epoch_, size));
}

bool FaultInjectingEnv::FileExists(const std::string& path) {
  MutexLock lock(&mu_);
  return current_.files.contains(path) || current_.dirs.contains(path);
}

StatusOr<uint64_t> FaultInjectingEnv::GetFileSize(const std::string& path) {
  MutexLock lock(&mu_);
  KV_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode, FindFile("stat", path));
  return static_cast<uint64_t>(inode->contents.size());
}

StatusOr<std::vector<std::string>> FaultInjectingEnv::GetChildren(
    const std::string& dir) {
  MutexLock lock(&mu_);
  if (current_.files.contains(dir)) return ErrnoError("opendir", dir, ENOTDIR);
  if (!current_.dirs.contains(dir)) return ErrnoError("opendir", dir, ENOENT);
  std::vector<std::string> names;
  auto in_dir = [&dir](const std::string& p) {
    return p != dir && DirName(p) == dir;
  };
  for (const auto& [path, inode] : current_.files) {
    if (in_dir(path)) names.push_back(BaseName(path));
  }
  for (const std::string& path : current_.dirs) {
    if (in_dir(path)) names.push_back(BaseName(path));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status FaultInjectingEnv::RemoveFile(const std::string& path) {
  MutexLock lock(&mu_);
  if (current_.dirs.contains(path)) return ErrnoError("unlink", path, EISDIR);
  if (current_.files.erase(path) == 0) {
    KV_RETURN_IF_ERROR(CheckParent("unlink", path));
    return ErrnoError("unlink", path, ENOENT);
  }
  return Status::Ok();
}

Status FaultInjectingEnv::RenameFile(const std::string& src,
                                     const std::string& dst) {
  const std::string what = src + " to " + dst;
  MutexLock lock(&mu_);
  if (const FaultSpec* fault = Tick(Op::kRename)) {
    return InjectedFault(*fault, "rename", what);
  }
  if (current_.dirs.contains(src)) {
    return UnimplementedError("rename " + what +
                              ": FaultInjectingEnv cannot rename directories");
  }
  auto it = current_.files.find(src);
  if (it == current_.files.end()) {
    const int err = ParentErrno(src);
    return ErrnoError("rename", what, err != 0 ? err : ENOENT);
  }
  if (current_.dirs.contains(dst)) return ErrnoError("rename", what, EISDIR);
  if (const int err = ParentErrno(dst); err != 0) {
    return ErrnoError("rename", what, err);
  }
  if (src == dst) return Status::Ok();
  std::shared_ptr<Inode> inode = std::move(it->second);
  current_.files.erase(it);
  current_.files[dst] = std::move(inode);
  return Status::Ok();
}

Status FaultInjectingEnv::CreateDir(const std::string& dir) {
  MutexLock lock(&mu_);
  if (current_.dirs.contains(dir)) return Status::Ok();
  if (current_.files.contains(dir)) return ErrnoError("mkdir", dir, EEXIST);
  KV_RETURN_IF_ERROR(CheckParent("mkdir", dir));
  current_.dirs.insert(dir);
  return Status::Ok();
}

Status FaultInjectingEnv::SyncDir(const std::string& dir) {
  MutexLock lock(&mu_);
  if (const FaultSpec* fault = Tick(Op::kSyncDir)) {
    return InjectedFault(*fault, "fsync dir", dir);
  }
  if (current_.files.contains(dir)) return ErrnoError("open dir", dir, ENOTDIR);
  if (!current_.dirs.contains(dir)) return ErrnoError("open dir", dir, ENOENT);
  auto in_dir = [&dir](const std::string& p) {
    return p != dir && DirName(p) == dir;
  };
  std::erase_if(durable_.files, [&](const auto& e) { return in_dir(e.first); });
  std::erase_if(durable_.dirs, in_dir);
  for (const auto& [path, inode] : current_.files) {
    if (in_dir(path)) durable_.files[path] = inode;
  }
  for (const std::string& path : current_.dirs) {
    if (in_dir(path)) durable_.dirs.insert(path);
  }
  return Status::Ok();
}

uint64_t FaultInjectingEnv::NowMicros() { return now_micros_.load(); }

void FaultInjectingEnv::AdvanceMicros(uint64_t micros) {
  now_micros_.fetch_add(micros);
}

void FaultInjectingEnv::SimulateCrash() {
  MutexLock lock(&mu_);
  current_ = durable_;
  PruneOrphans(current_);
  for (auto& [path, inode] : current_.files) inode->contents = inode->durable;
  durable_ = current_;
  ++epoch_;
}

void FaultInjectingEnv::PruneOrphans(Namespace& ns) {
  // A parent is a strict prefix of its child, so std::set order visits it
  // first and a removed parent takes its whole subtree with it.
  for (auto it = ns.dirs.begin(); it != ns.dirs.end();) {
    if (IsRoot(*it) || ns.dirs.contains(DirName(*it))) {
      ++it;
    } else {
      it = ns.dirs.erase(it);
    }
  }
  std::erase_if(ns.files, [&ns](const auto& e) {
    return !ns.dirs.contains(DirName(e.first));
  });
}

void FaultInjectingEnv::ClearFaults() {
  MutexLock lock(&mu_);
  for (Trigger& trigger : triggers_) trigger.armed = false;
}

uint64_t FaultInjectingEnv::CountOf(Op op) const {
  MutexLock lock(&mu_);
  return counts_[static_cast<size_t>(op)];
}

void FaultInjectingEnv::Arm(Op op, uint64_t n, const FaultSpec& spec) {
  KV_CHECK_GE(n, 1u) << "fault ordinals are 1-based";
  MutexLock lock(&mu_);
  const size_t i = static_cast<size_t>(op);
  triggers_[i] =
      Trigger{.armed = true, .fail_at = counts_[i] + n, .spec = spec};
}

const FaultSpec* FaultInjectingEnv::Tick(Op op) {
  const size_t i = static_cast<size_t>(op);
  const uint64_t count = ++counts_[i];
  Trigger& trigger = triggers_[i];
  if (!trigger.armed || count < trigger.fail_at) return nullptr;
  if (trigger.spec.sticky) return &trigger.spec;
  if (count != trigger.fail_at) return nullptr;
  trigger.armed = false;  // the spec stays readable until the next Arm()
  return &trigger.spec;
}

int FaultInjectingEnv::ParentErrno(const std::string& path) const {
  const std::string parent = DirName(path);
  if (current_.dirs.contains(parent)) return 0;
  return current_.files.contains(parent) ? ENOTDIR : ENOENT;
}

Status FaultInjectingEnv::CheckParent(std::string_view op,
                                      const std::string& path) const {
  const int err = ParentErrno(path);
  return err == 0 ? Status::Ok() : ErrnoError(op, path, err);
}

StatusOr<std::shared_ptr<FaultInjectingEnv::Inode>> FaultInjectingEnv::FindFile(
    std::string_view op, const std::string& path) const {
  if (current_.dirs.contains(path)) return ErrnoError(op, path, EISDIR);
  auto it = current_.files.find(path);
  if (it != current_.files.end()) return it->second;
  KV_RETURN_IF_ERROR(CheckParent(op, path));
  return ErrnoError(op, path, ENOENT);
}

Status FaultInjectingEnv::CheckEpoch(uint64_t epoch,
                                     const std::string& path) const {
  if (epoch == epoch_) return Status::Ok();
  return IOError("use of " + path + ": handle opened before SimulateCrash()");
}

Status FaultInjectingEnv::FileAppend(const MemWritableFile& file,
                                     std::span<const std::byte> data) {
  MutexLock lock(&mu_);
  KV_RETURN_IF_ERROR(CheckEpoch(file.epoch_, file.path_));
  std::string& contents = file.inode_->contents;
  if (const FaultSpec* fault = Tick(Op::kAppend)) {
    // Only the n-th Append is short; sticky followers write nothing.
    const size_t i = static_cast<size_t>(Op::kAppend);
    const bool first = counts_[i] == triggers_[i].fail_at;
    const size_t n =
        first ? std::min(fault->num_partial_bytes, data.size()) : 0;
    contents.append(reinterpret_cast<const char*>(data.data()), n);
    return InjectedFault(*fault, "write", file.path_);
  }
  contents.append(reinterpret_cast<const char*>(data.data()), data.size());
  return Status::Ok();
}

Status FaultInjectingEnv::FileSync(const MemWritableFile& file) {
  MutexLock lock(&mu_);
  KV_RETURN_IF_ERROR(CheckEpoch(file.epoch_, file.path_));
  if (const FaultSpec* fault = Tick(Op::kSync)) {
    return InjectedFault(*fault, "fsync", file.path_);
  }
  file.inode_->durable = file.inode_->contents;
  return Status::Ok();
}

StatusOr<size_t> FaultInjectingEnv::FileRead(uint64_t epoch,
                                             const std::string& path,
                                             const Inode& inode,
                                             uint64_t offset,
                                             std::span<std::byte> out) {
  MutexLock lock(&mu_);
  KV_RETURN_IF_ERROR(CheckEpoch(epoch, path));
  if (const FaultSpec* fault = Tick(Op::kRead)) {
    return InjectedFault(*fault, "read", path);
  }
  const std::string& contents = inode.contents;
  if (offset >= contents.size()) return size_t{0};
  const size_t n = std::min<uint64_t>(out.size(), contents.size() - offset);
  std::memcpy(out.data(), contents.data() + offset, n);
  return n;
}

}  // namespace kvault
