// PageStore: where the prefix cache keeps page records (page_record.h)
// outside the KV pool, by key: a local directory (DiskPageStore) or a
// shared remote store. A store holds opaque record bytes under their key;
// whoever reads a record checks it (OpenPageRecord and the state-file
// checks), so a store never has to be trusted. Each store keeps to a byte
// budget by dropping its least recently used records, and counts what it
// did.
#ifndef KVAULT_KV_PAGE_STORE_H_
#define KVAULT_KV_PAGE_STORE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/page_key.h"

namespace kvault {

struct PageStoreStats {
  uint64_t num_records = 0;
  uint64_t used_bytes = 0;
  uint64_t budget_bytes = 0;
  uint64_t puts = 0;        // records written
  uint64_t put_bytes = 0;
  uint64_t hits = 0;        // Get found the record
  uint64_t misses = 0;      // Get did not
  uint64_t evictions = 0;   // records dropped for the budget
  uint64_t removals = 0;    // records removed by Remove (e.g. found corrupt)
  // Local stores: entries with a record's name that are not records (a
  // directory, a FIFO), skipped or left where they are.
  uint64_t foreign_entries = 0;
  // Remote stores only (0 for local ones):
  uint64_t errors = 0;          // commands that failed (down, slow, refused)
  uint64_t read_bytes = 0;      // record bytes fetched by Get
  uint64_t read_micros = 0;     // time those fetches took
  uint64_t queued_bytes = 0;    // records waiting to be written
  uint64_t dropped_writes = 0;  // records not written (queue full, errors)
  bool available = true;        // false while the store is backing off
};

class PageStore {
 public:
  virtual ~PageStore() = default;
  // Returns the store's name in logs and metrics: "disk", "redis".
  virtual std::string_view name() const = 0;
  // Returns true when a record for `key` is stored (as far as the store
  // knows without reading it).
  virtual bool Contains(const PageKey& key) const = 0;
  // Stores `record` (taken: a caller done with it moves it in) under
  // `key`; a no-op (OK) when the key is present,
  // since records are content-addressed. Drops least recently used records
  // to stay within the budget; ResourceExhausted when the record alone is
  // larger than the budget. On failure nothing changed.
  virtual Status Put(const PageKey& key, std::string record) = 0;
  // Opens the record of `key` (now the most recently used); NotFound when
  // absent. The reader stays valid after the record is dropped.
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> Get(
      const PageKey& key) = 0;
  // Opens the records of `keys` as Get does, one result per key in order;
  // a remote store fetches them in one round trip.
  virtual std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>> GetMany(
      std::span<const PageKey> keys) {
    std::vector<StatusOr<std::unique_ptr<RandomAccessFile>>> files;
    for (const PageKey& key : keys) files.push_back(Get(key));
    return files;
  }
  // Deletes the record of `key` (OK when absent), e.g. one found corrupt.
  virtual Status Remove(const PageKey& key) = 0;
  // Returns the counters and occupancy.
  virtual PageStoreStats Stats() const = 0;
  // Returns the expected seconds a Get of a `num_bytes` record takes, from
  // what the store measured (0 for a local store; +infinity while a remote
  // one is down), for the fetch-or-recompute choice.
  virtual double ExpectedFetchSeconds(uint64_t num_bytes) const {
    (void)num_bytes;
    return 0;
  }
};

}  // namespace kvault

#endif  // KVAULT_KV_PAGE_STORE_H_
