#include "kv/mem_page_store.h"

#include <cstdint>
#include <utility>

#include "core/memory_file.h"

namespace kvault {

bool MemPageStore::Contains(const PageKey& key) const {
  return records.contains(key);
}

Status MemPageStore::Put(const PageKey& key, std::string record) {
  const uint64_t num_bytes = record.size();
  if (records.emplace(key, std::move(record)).second) {
    ++stats_.puts;
    stats_.put_bytes += num_bytes;
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<RandomAccessFile>> MemPageStore::Get(
    const PageKey& key) {
  auto it = records.find(key);
  if (it == records.end()) {
    ++stats_.misses;
    return NotFoundError("page " + key.ToHex() + " is not in the store");
  }
  ++stats_.hits;
  return std::unique_ptr<RandomAccessFile>(new StringRandomAccessFile(
      std::make_shared<const std::string>(it->second)));
}

Status MemPageStore::Remove(const PageKey& key) {
  if (records.erase(key) > 0) ++stats_.removals;
  return Status::Ok();
}

PageStoreStats MemPageStore::Stats() const {
  PageStoreStats s = stats_;
  s.num_records = records.size();
  for (const auto& [key, bytes] : records) s.used_bytes += bytes.size();
  s.budget_bytes = UINT64_MAX;
  return s;
}

}  // namespace kvault
