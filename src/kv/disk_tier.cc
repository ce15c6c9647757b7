#include "kv/disk_tier.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/log.h"
#include "kv/state_file.h"
#include "kv/state_format.h"
#include "kv/disk_page_store.h"
#include "kv/temp_files.h"

namespace kvault {
namespace {

constexpr char kFilePrefix[] = "seq-";
constexpr char kFileSuffix[] = ".kvstate";

// Streams `write` into `tmp`, syncs and closes it, and runs `before_commit`.
StatusOr<uint64_t> WriteTemp(Env* env, const std::string& tmp,
                             const SpillWriteFn& write, bool sync,
                             const BeforeCommitFn& before_commit) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                      env->NewWritableFile(tmp));
  KV_ASSIGN_OR_RETURN(uint64_t num_bytes, write(file.get()));
  if (sync) KV_RETURN_IF_ERROR(file->Sync());
  KV_RETURN_IF_ERROR(file->Close());
  if (before_commit) KV_RETURN_IF_ERROR(before_commit(tmp, num_bytes));
  return num_bytes;
}

// WriteFileAtomically; `*renamed` says whether the new file replaced `path`
// (true also when only the final directory sync failed).
StatusOr<uint64_t> AtomicWrite(Env* env, const std::string& path,
                               const SpillWriteFn& write, bool sync,
                               const BeforeCommitFn& before_commit,
                               bool* renamed) {
  *renamed = false;
  const std::string tmp = TempPathFor(path);
  StatusOr<uint64_t> num_bytes =
      WriteTemp(env, tmp, write, sync, before_commit);
  Status status = num_bytes.status();
  if (status.ok()) status = env->RenameFile(tmp, path);
  if (!status.ok()) {
    if (env->FileExists(tmp)) (void)env->RemoveFile(tmp);  // best effort
    return status.WithContext("writing " + path);
  }
  *renamed = true;
  if (sync)
    KV_RETURN_IF_ERROR(env->SyncDir(DirName(path))
                           .WithContext("writing " + path +
                                        " (renamed, directory not synced)"));
  return num_bytes;
}

}  // namespace

StatusOr<uint64_t> WriteFileAtomically(Env* env, const std::string& path,
                                       const SpillWriteFn& write, bool sync,
                                       const BeforeCommitFn& before_commit) {
  bool renamed = false;
  return AtomicWrite(env, path, write, sync, before_commit, &renamed);
}

std::string DiskTierFileName(SeqId seq) {
  return kFilePrefix + std::to_string(seq.value()) + kFileSuffix;
}

std::optional<SeqId> ParseDiskTierFileName(const std::string& name) {
  const std::string_view prefix = kFilePrefix;
  const std::string_view suffix = kFileSuffix;
  if (name.size() <= prefix.size() + suffix.size() ||
      !name.starts_with(prefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  // Canonical decimal only, so each id has exactly one file name.
  if (digits.size() > 10 || (digits.size() > 1 && digits[0] == '0') ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const uint64_t value = std::stoull(digits);
  if (value > UINT32_MAX) return std::nullopt;
  return SeqId(static_cast<uint32_t>(value));
}

DiskTier::DiskTier(Env* env, std::string dir, uint64_t budget_bytes,
                   KvLayout layout, ModelFingerprint fingerprint, bool sync)
    : env_(env),
      dir_(std::move(dir)),
      budget_bytes_(budget_bytes),
      layout_(layout),
      fingerprint_(fingerprint),
      sync_(sync) {}

StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(
    Env* env, const std::string& dir, uint64_t budget_bytes,
    const KvLayout& layout, const ModelFingerprint& fingerprint, bool sync) {
  if (env == nullptr || dir.empty()) {
    return InvalidArgumentError("disk tier needs an env and a directory");
  }
  std::unique_ptr<DiskTier> tier(
      new DiskTier(env, dir, budget_bytes, layout, fingerprint, sync));
  KV_RETURN_IF_ERROR(tier->Rebuild());
  return tier;
}

Status DiskTier::Rebuild() {
  const std::string where = "disk tier " + dir_;
  KV_RETURN_IF_ERROR(env_->CreateDir(dir_).WithContext(where));
  // A directory that is not durable would take every entry with it.
  if (sync_)
    KV_RETURN_IF_ERROR(env_->SyncDir(DirName(dir_)).WithContext(where));
  KV_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->GetChildren(dir_));
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir_, name);
    const size_t tmp_at = name.rfind(kTempMarker);
    if (IsTempFileName(name) &&
        ParseDiskTierFileName(name.substr(0, tmp_at))) {
      Status removed = env_->RemoveFile(path);
      KV_LOG(INFO) << where << ": removed temporary file " << name
                   << " left by an interrupted write: " << removed;
      continue;
    }
    std::optional<SeqId> seq = ParseDiskTierFileName(name);
    if (!seq && name == kPrefixStoreDirName) continue;  // the prefix store
    if (!seq) {
      KV_LOG(WARNING) << where << ": ignoring unrelated file " << name;
      continue;
    }
    StatusOr<SpillEntryInfo> entry = Recover(*seq, path);
    if (!entry.ok()) {
      KV_LOG(WARNING) << where << ": skipping " << name
                      << " (left on disk): " << entry.status();
      continue;
    }
    used_bytes_ += entry->num_bytes;
    entries_[*seq] = *entry;
  }
  KV_LOG(INFO) << where << ": recovered " << entries_.size() << " entries, "
               << used_bytes_ << " of " << budget_bytes_ << " budget bytes";
  return Status::Ok();
}

StatusOr<SpillEntryInfo> DiskTier::Recover(SeqId seq, const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                      env_->NewRandomAccessFile(path));
  KV_ASSIGN_OR_RETURN(StateHeader header, ReadStateHeader(*file));
  KV_RETURN_IF_ERROR(CheckCompatible(header, layout_, fingerprint_));
  return SpillEntryInfo{seq, file->size(), header.num_tokens, 0};
}

bool DiskTier::Contains(SeqId seq) const { return entries_.contains(seq); }

std::vector<SpillEntryInfo> DiskTier::Entries() const {
  std::vector<SpillEntryInfo> out;
  out.reserve(entries_.size());
  for (const auto& [seq, info] : entries_) out.push_back(info);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.last_use < b.last_use;  // map order already sorts ties by seq
  });
  return out;
}

std::string DiskTier::PathOf(SeqId seq) const {
  return JoinPath(dir_, DiskTierFileName(seq));
}

StatusOr<SpillEntryInfo> DiskTier::Put(SeqId seq, uint64_t last_use,
                                       const SpillWriteFn& write) {
  auto old = entries_.find(seq);
  const uint64_t others =
      used_bytes_ - (old != entries_.end() ? old->second.num_bytes : 0);
  SpillEntryInfo info{seq, 0, 0, last_use};
  // Runs on the closed temporary file: only a complete, matching file that
  // fits the budget may replace the entry.
  auto check = [&](const std::string& tmp, uint64_t num_bytes) -> Status {
    KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                        env_->NewRandomAccessFile(tmp));
    if (file->size() != num_bytes) {
      return InternalError(tmp + ": writer reported " +
                           std::to_string(num_bytes) + " bytes, file has " +
                           std::to_string(file->size()));
    }
    if (others + num_bytes > budget_bytes_) {
      return ResourceExhaustedError(
          "state of " + std::to_string(num_bytes) +
          " bytes does not fit: " + std::to_string(others) + " of " +
          std::to_string(budget_bytes_) + " budget bytes in use");
    }
    KV_ASSIGN_OR_RETURN(StateHeader header, ReadStateHeader(*file));
    KV_RETURN_IF_ERROR(CheckCompatible(header, layout_, fingerprint_));
    info.num_bytes = num_bytes;
    info.num_tokens = header.num_tokens;
    return Status::Ok();
  };
  bool renamed = false;
  StatusOr<uint64_t> written =
      AtomicWrite(env_, PathOf(seq), write, sync_, check, &renamed);
  if (!written.ok()) {
    if (renamed) {
      // The new file replaced the old one but is not durable; drop it so the
      // index never claims more than the disk is known to keep.
      (void)env_->RemoveFile(PathOf(seq));
      if (old != entries_.end()) {
        used_bytes_ = others;
        entries_.erase(old);
      }
    }
    return written.status().WithContext("disk tier: seq#" +
                                        std::to_string(seq.value()));
  }
  used_bytes_ = others + info.num_bytes;
  entries_[seq] = info;
  return info;
}

StatusOr<std::unique_ptr<RandomAccessFile>> DiskTier::Open(SeqId seq) {
  if (!entries_.contains(seq)) {
    return NotFoundError("disk tier " + dir_ + ": no entry for seq#" +
                         std::to_string(seq.value()));
  }
  return env_->NewRandomAccessFile(PathOf(seq));
}

Status DiskTier::Remove(SeqId seq) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return Status::Ok();
  Status removed = env_->RemoveFile(PathOf(seq));
  if (!removed.ok() && !removed.IsNotFound()) {
    return removed.WithContext("disk tier: removing seq#" +
                               std::to_string(seq.value()));
  }
  used_bytes_ -= it->second.num_bytes;
  entries_.erase(it);
  if (sync_) {
    // The file is gone from the namespace already; an unsynced removal can
    // only bring back a valid older state after a crash.
    KV_RETURN_IF_ERROR(env_->SyncDir(dir_).WithContext(
        "disk tier: removed seq#" + std::to_string(seq.value()) +
        ", directory not synced"));
  }
  return Status::Ok();
}

}  // namespace kvault
