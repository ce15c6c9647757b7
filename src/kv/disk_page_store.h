// DiskPageStore: the prefix cache's local, persistent page store. Each
// record is the file "<dir>/<key hex>.kvpage", written atomically (temp
// file, fsync, rename, directory fsync), so after a crash a record is
// either absent or complete. The index lives in memory and is rebuilt by
// Open() from the directory listing alone (names and sizes, no reads), so a
// restart costs one directory scan whatever the store's size; a damaged
// file is found when it is read (OpenPageRecord) and removed then.
// Temporary files a crash left are removed at Open(); other files are left
// alone. Records recovered at Open() are older than any written since, in
// name order among themselves. Not thread-safe: the caller serialises
// every call.
#ifndef KVAULT_KV_DISK_PAGE_STORE_H_
#define KVAULT_KV_DISK_PAGE_STORE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kv/page_store.h"

namespace kvault {

// The prefix store's directory name inside the spill directory; the disk
// tier, which shares that directory, leaves it alone.
inline constexpr std::string_view kPrefixStoreDirName = "prefix";

// Returns "<key hex>.kvpage".
std::string PageRecordFileName(const PageKey& key);
// Parses PageRecordFileName's form; nullopt for any other name.
std::optional<PageKey> ParsePageRecordFileName(std::string_view name);

class DiskPageStore final : public PageStore {
 public:
  // Opens the store in `dir` (created when missing; its parent must exist)
  // with `budget_bytes`, rebuilding the index; records beyond the budget
  // (it was lowered) are dropped, least recently used first. `sync` false
  // skips fsyncs (tests, benchmarks).
  static StatusOr<std::unique_ptr<DiskPageStore>> Open(
      Env* env, const std::string& dir, uint64_t budget_bytes,
      bool sync = true);

  // Returns "disk".
  std::string_view name() const override { return "disk"; }
  // Returns true when `key` is indexed.
  bool Contains(const PageKey& key) const override;
  // Writes the record file atomically (see PageStore::Put).
  Status Put(const PageKey& key, std::string record) override;
  // Opens the record file (see PageStore::Get); a file that vanished is
  // dropped from the index and reported NotFound.
  StatusOr<std::unique_ptr<RandomAccessFile>> Get(const PageKey& key) override;
  // Deletes the record file.
  Status Remove(const PageKey& key) override;
  // Returns the counters and occupancy.
  PageStoreStats Stats() const override;
  // Returns the path of `key`'s record (whether or not it exists).
  std::string PathOf(const PageKey& key) const;

 private:
  struct Entry {
    uint64_t num_bytes = 0;
    std::list<PageKey>::iterator lru;  // position in lru_
  };

  DiskPageStore(Env* env, std::string dir, uint64_t budget_bytes, bool sync);
  // Scans dir_ and fills the index (see the file comment).
  Status Rebuild();
  // Makes `key` the most recently used.
  void Touch(Entry& entry);
  // Drops least recently used records until `incoming` more bytes fit.
  Status EvictFor(uint64_t incoming);
  // Deletes `key`'s file and forgets it.
  Status Drop(const PageKey& key);

  Env* env_;
  std::string dir_;
  uint64_t budget_bytes_;
  bool sync_;
  std::unordered_map<PageKey, Entry, PageKeyHash> index_;
  std::list<PageKey> lru_;  // least recently used first
  PageStoreStats stats_;
};

}  // namespace kvault

#endif  // KVAULT_KV_DISK_PAGE_STORE_H_
