// RamTier: the host-RAM spill tier. Each entry is a complete state file held
// in a std::string, so a spilled sequence comes back through the same
// validated restore path as a file on disk. Not thread-safe.
#ifndef KVAULT_KV_RAM_TIER_H_
#define KVAULT_KV_RAM_TIER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "kv/spill_tier.h"

namespace kvault {

class RamTier final : public SpillTier {
 public:
  // Builds an empty tier whose entries may hold `budget_bytes` together.
  explicit RamTier(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Returns "ram".
  std::string_view name() const override { return "ram"; }
  // Returns the budget given at construction.
  uint64_t budget_bytes() const override { return budget_bytes_; }
  // Returns the total size of the stored state files.
  uint64_t used_bytes() const override { return used_bytes_; }
  // Returns true when `seq` has an entry.
  bool Contains(SeqId seq) const override;
  // Returns every entry, least recently used first.
  std::vector<SpillEntryInfo> Entries() const override;
  // Writes the state into a fresh string, validates it, then commits (see
  // SpillTier::Put).
  StatusOr<SpillEntryInfo> Put(SeqId seq, uint64_t last_use,
                               const SpillWriteFn& write) override;
  // Returns a reader sharing the entry's bytes; NotFound when absent.
  StatusOr<std::unique_ptr<RandomAccessFile>> Open(SeqId seq) override;
  // Frees `seq`'s entry (readers already open keep the bytes alive).
  Status Remove(SeqId seq) override;

 private:
  struct Entry {
    std::shared_ptr<const std::string> bytes;  // the whole state file
    SpillEntryInfo info;
  };

  uint64_t budget_bytes_;
  uint64_t used_bytes_ = 0;
  std::map<SeqId, Entry> entries_;
};

}  // namespace kvault

#endif  // KVAULT_KV_RAM_TIER_H_
