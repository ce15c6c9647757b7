// MemPageStore: a PageStore in process memory with no budget, for tests
// and fuzzers that need records they can inspect and damage.
#ifndef KVAULT_KV_MEM_PAGE_STORE_H_
#define KVAULT_KV_MEM_PAGE_STORE_H_

#include <map>
#include <memory>
#include <string>

#include "kv/page_store.h"

namespace kvault {

class MemPageStore final : public PageStore {
 public:
  // Returns "mem".
  std::string_view name() const override { return "mem"; }
  // Returns true when `key` is held.
  bool Contains(const PageKey& key) const override;
  // Keeps a copy of `record` (no-op when the key is held).
  Status Put(const PageKey& key, std::string record) override;
  // Returns a reader of the record's bytes as they are now.
  StatusOr<std::unique_ptr<RandomAccessFile>> Get(const PageKey& key) override;
  // Forgets `key`.
  Status Remove(const PageKey& key) override;
  // Returns the counters (no budget: budget_bytes is UINT64_MAX).
  PageStoreStats Stats() const override;

  // The records, which tests may edit.
  std::map<PageKey, std::string> records;

 private:
  PageStoreStats stats_;
};

}  // namespace kvault

#endif  // KVAULT_KV_MEM_PAGE_STORE_H_
