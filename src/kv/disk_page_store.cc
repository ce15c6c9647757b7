#include "kv/disk_page_store.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/temp_files.h"

namespace kvault {
namespace {

constexpr std::string_view kSuffix = ".kvpage";

}  // namespace

std::string PageRecordFileName(const PageKey& key) {
  return key.ToHex() + std::string(kSuffix);
}

std::optional<PageKey> ParsePageRecordFileName(std::string_view name) {
  if (name.size() != 32 + kSuffix.size() || !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  return PageKey::FromHex(name.substr(0, 32));
}

StatusOr<std::unique_ptr<DiskPageStore>> DiskPageStore::Open(
    Env* env, const std::string& dir, uint64_t budget_bytes, bool sync) {
  std::unique_ptr<DiskPageStore> store(
      new DiskPageStore(env, dir, budget_bytes, sync));
  KV_RETURN_IF_ERROR(store->Rebuild());
  return store;
}

DiskPageStore::DiskPageStore(Env* env, std::string dir, uint64_t budget_bytes,
                             bool sync)
    : env_(env), dir_(std::move(dir)), budget_bytes_(budget_bytes),
      sync_(sync) {
  stats_.budget_bytes = budget_bytes;
}

Status DiskPageStore::Rebuild() {
  const std::string where = "page store " + dir_;
  KV_RETURN_IF_ERROR(env_->CreateDir(dir_).WithContext(where));
  if (sync_) {
    KV_RETURN_IF_ERROR(env_->SyncDir(DirName(dir_)).WithContext(where));
  }
  KV_ASSIGN_OR_RETURN(std::vector<std::string> removed,
                      RemoveStaleTempFiles(env_, dir_));
  for (const std::string& name : removed) {
    KV_LOG(INFO) << where << ": removed temporary file " << name
                 << " left by an interrupted write";
  }
  KV_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->GetChildren(dir_));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::optional<PageKey> key = ParsePageRecordFileName(name);
    if (!key) continue;  // not ours: left alone
    StatusOr<uint64_t> size = env_->GetFileSize(JoinPath(dir_, name));
    if (!size.ok()) {
      // A directory or FIFO with a record's name, say: not a record.
      KV_LOG(WARNING) << where << ": skipping " << name << ": "
                      << size.status();
      ++stats_.foreign_entries;
      continue;
    }
    lru_.push_back(*key);
    index_[*key] = Entry{*size, std::prev(lru_.end())};
    stats_.used_bytes += *size;
  }
  KV_RETURN_IF_ERROR(EvictFor(0).WithContext(where));
  KV_LOG(INFO) << where << ": " << index_.size() << " records, "
               << stats_.used_bytes << " of " << budget_bytes_
               << " budget bytes";
  return Status::Ok();
}

bool DiskPageStore::Contains(const PageKey& key) const {
  return index_.contains(key);
}

Status DiskPageStore::Put(const PageKey& key, std::string record) {
  if (auto it = index_.find(key); it != index_.end()) {
    Touch(it->second);
    return Status::Ok();
  }
  if (record.size() > budget_bytes_) {
    return ResourceExhaustedError(
        "page record of " + std::to_string(record.size()) +
        " bytes exceeds the disk page store's budget of " +
        std::to_string(budget_bytes_));
  }
  KV_RETURN_IF_ERROR(EvictFor(record.size()));
  auto write = [record](WritableFile* out) -> StatusOr<uint64_t> {
    KV_RETURN_IF_ERROR(out->Append(record));
    return record.size();
  };
  Status written = WriteFileAtomically(env_, PathOf(key), write, sync_).status();
  if (written.IsNotFound() && !env_->FileExists(dir_)) {
    // The directory was removed under the running server: make it again
    // (its records went with it; Get forgets each on its first miss).
    KV_LOG(WARNING) << "page store " << dir_ << " vanished; recreating it";
    KV_RETURN_IF_ERROR(env_->CreateDir(dir_));
    written = WriteFileAtomically(env_, PathOf(key), write, sync_).status();
  }
  KV_RETURN_IF_ERROR(written);
  lru_.push_back(key);
  index_[key] = Entry{record.size(), std::prev(lru_.end())};
  stats_.used_bytes += record.size();
  ++stats_.puts;
  stats_.put_bytes += record.size();
  return Status::Ok();
}

StatusOr<std::unique_ptr<RandomAccessFile>> DiskPageStore::Get(
    const PageKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return NotFoundError("page " + key.ToHex() + " is not in the disk store");
  }
  StatusOr<std::unique_ptr<RandomAccessFile>> file =
      env_->NewRandomAccessFile(PathOf(key));
  if (!file.ok()) {
    ++stats_.misses;
    if (file.status().IsNotFound()) {
      // Deleted behind our back: forget it.
      stats_.used_bytes -= it->second.num_bytes;
      lru_.erase(it->second.lru);
      index_.erase(it);
    }
    return file.status();
  }
  ++stats_.hits;
  Touch(it->second);
  return file;
}

Status DiskPageStore::Remove(const PageKey& key) {
  if (!index_.contains(key)) return Status::Ok();
  KV_RETURN_IF_ERROR(Drop(key));
  ++stats_.removals;
  return Status::Ok();
}

PageStoreStats DiskPageStore::Stats() const {
  PageStoreStats s = stats_;
  s.num_records = index_.size();
  return s;
}

std::string DiskPageStore::PathOf(const PageKey& key) const {
  return JoinPath(dir_, PageRecordFileName(key));
}

void DiskPageStore::Touch(Entry& entry) {
  lru_.splice(lru_.end(), lru_, entry.lru);
}

Status DiskPageStore::EvictFor(uint64_t incoming) {
  while (!lru_.empty() && stats_.used_bytes + incoming > budget_bytes_) {
    KV_RETURN_IF_ERROR(Drop(lru_.front()));
    ++stats_.evictions;
  }
  return Status::Ok();
}

Status DiskPageStore::Drop(const PageKey& key) {
  auto it = index_.find(key);
  const Status removed = env_->RemoveFile(PathOf(key));
  if (!removed.ok() && !removed.IsNotFound()) {
    // Not removable (replaced by a directory, say): forget it rather than
    // let one foreign entry block every eviction after it.
    KV_LOG(WARNING) << "page store " << dir_ << ": cannot remove "
                    << PageRecordFileName(key) << " (" << removed
                    << "); forgetting it";
    ++stats_.foreign_entries;
  }
  stats_.used_bytes -= it->second.num_bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
  return Status::Ok();
}

}  // namespace kvault
