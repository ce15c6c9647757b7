// SpillTier: a place outside the KV pool where evicted sequences are kept as
// complete state files (docs/state_file_format.md), so they can be restored
// later through the same path as a user's saved slot, without recompute.
// Tiers are ordered by SpillTiers (host RAM first, then disk); each has a
// byte budget its entries never exceed. A tier never drops an entry on its
// own: SpillTiers (spill_tiers.h) decides what is demoted or dropped, and
// reports it.
// Not thread-safe: the caller serialises every call.
#ifndef KVAULT_KV_SPILL_TIER_H_
#define KVAULT_KV_SPILL_TIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_types.h"

namespace kvault {

// Writes one complete state file to `out` (not closed) and returns the bytes
// written, e.g. a bound WriteSequenceState.
using SpillWriteFn = std::function<StatusOr<uint64_t>(WritableFile* out)>;

// What a tier knows of one stored sequence.
struct SpillEntryInfo {
  SeqId seq;
  uint64_t num_bytes = 0;   // size of the stored state file
  uint64_t num_tokens = 0;  // from the state file's header
  uint64_t last_use = 0;    // the vault's LRU clock when it was stored
};

class SpillTier {
 public:
  virtual ~SpillTier() = default;

  // Returns "ram" or "disk".
  virtual std::string_view name() const = 0;
  // Returns the most bytes the tier's entries may occupy together.
  virtual uint64_t budget_bytes() const = 0;
  // Returns the bytes its entries occupy now.
  virtual uint64_t used_bytes() const = 0;
  // Returns true when an entry for `seq` is stored.
  virtual bool Contains(SeqId seq) const = 0;
  // Returns every entry, least recently used first (by last_use, then seq).
  virtual std::vector<SpillEntryInfo> Entries() const = 0;
  // Stores the state file `write` produces as `seq`'s entry (replacing an
  // older one) and returns its info. The written file's header and length
  // are validated (checks 1-7 of the format) before it is committed.
  // ResourceExhausted when it would push used_bytes() over budget_bytes().
  // On any failure nothing is stored and an older entry for `seq` stays.
  virtual StatusOr<SpillEntryInfo> Put(SeqId seq, uint64_t last_use,
                                       const SpillWriteFn& write) = 0;
  // Opens `seq`'s state file for reading; the reader stays valid after the
  // entry is removed. NotFound when absent.
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> Open(SeqId seq) = 0;
  // Deletes `seq`'s entry; OK (no-op) when absent. On error the entry stays.
  virtual Status Remove(SeqId seq) = 0;
};

}  // namespace kvault

#endif  // KVAULT_KV_SPILL_TIER_H_
