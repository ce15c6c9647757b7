// SpillTiers: the ordered list of spill tiers (host RAM, then disk) behind a
// KvVault, and every decision that concerns only them. The vault decides
// which sequence leaves the pool and when; once it hands over a state file,
// where that file goes and what gives way for it is decided here. An entry
// goes to the first tier whose budget can hold it. A tier short of room
// makes it by moving its least recently used entries down to the next tier;
// only the last tier (or one whose entry would not fit the next) drops
// them, and a drop is counted and logged because its KV is lost and must be
// recomputed. With drops disallowed the store is refused instead, so no
// spilled KV is ever lost. Keeping this apart from the vault keeps the
// tiers' budgets and counters in one place, testable without a room ladder.
//
// Not thread-safe: the owner (the vault) serialises every call.
#ifndef KVAULT_KV_SPILL_TIERS_H_
#define KVAULT_KV_SPILL_TIERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_types.h"
#include "kv/spill_tier.h"
#include "kv/state_file.h"

namespace kvault {

struct TierStats {
  std::string name;
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t num_entries = 0;
  uint64_t num_spills = 0;       // entries stored (evictions and demotions in)
  uint64_t spilled_bytes = 0;    // their bytes
  uint64_t num_bring_backs = 0;  // entries restored into the cache
  uint64_t num_demotions = 0;    // entries moved from here to the next tier
  uint64_t num_drops = 0;        // entries discarded: every tier over budget
  uint64_t dropped_bytes = 0;
};

// Where Store put an entry.
struct StoredEntry {
  std::string tier;  // the tier's name, "ram" or "disk"
  SpillEntryInfo info;
};

class SpillTiers {
 public:
  // Takes `tiers` in spill order; `allow_drops` false refuses a store that
  // would need a drop (ResourceExhausted) instead of dropping.
  SpillTiers(std::vector<std::unique_ptr<SpillTier>> tiers, bool allow_drops);

  // Returns the index of the first tier holding `seq`.
  std::optional<size_t> TierOf(SeqId seq) const;
  // Returns the name of tier `t` ("ram" or "disk").
  std::string_view TierName(size_t t) const;
  // Returns the largest tier budget (0 without tiers).
  uint64_t MaxTierBudget() const;
  // Returns every sequence some tier holds, ascending, each once.
  std::vector<SeqId> Sequences() const;
  // Stores the state file `write` produces (`num_bytes`, as used at
  // `last_use`) as `seq`'s entry in the first tier whose budget can hold
  // it, demoting or dropping older entries there first, then removes older
  // copies from the other tiers. ResourceExhausted when it exceeds every
  // budget, or when room needs a drop and drops are off; on error
  // nothing of `seq` changes.
  StatusOr<StoredEntry> Store(SeqId seq, uint64_t last_use, uint64_t num_bytes,
                              const SpillWriteFn& write);
  // Opens `seq`'s entry in tier `t` for reading (e.g. to restore it).
  StatusOr<std::unique_ptr<RandomAccessFile>> Open(size_t t, SeqId seq);
  // Books `seq`, restored from tier `t` into the cache: counts and logs the
  // bring-back, then discards its now stale entries.
  void BroughtBack(size_t t, SeqId seq, const RestoreResult& restored);
  // Owner thread: `seq`'s entry in the first tier holding it, readable on
  // any thread even if the tier moves or drops the entry meanwhile (a RAM
  // entry's bytes are shared, a disk entry's file stays open); NotFound
  // when no tier holds it.
  StatusOr<std::unique_ptr<RandomAccessFile>> OpenEntry(SeqId seq);
  // Copies `seq`'s entry (first tier holding it) to `path` atomically,
  // synced when `sync`, behind llama.cpp's token header (slot_file.h) when
  // `llama_token_header`; NotFound when no tier holds it.
  StatusOr<SaveResult> CopyTo(SeqId seq, Env* env, const std::string& path,
                              bool sync, bool llama_token_header);
  // Removes `seq` from every tier, logging failures (stale copies `why`).
  void DiscardStale(SeqId seq, std::string_view why);
  // Removes `seq` from every tier; returns the first error, having tried all.
  Status Erase(SeqId seq);
  // Returns each tier's budget, usage and counters, in spill order.
  std::vector<TierStats> Stats() const;

 private:
  struct TierCounters {
    uint64_t num_spills = 0;
    uint64_t spilled_bytes = 0;
    uint64_t num_bring_backs = 0;
    uint64_t num_demotions = 0;
    uint64_t num_drops = 0;
    uint64_t dropped_bytes = 0;
  };

  // Store into tier `t` (`num_bytes` <= its budget): makes room, puts, and
  // removes older copies elsewhere.
  StatusOr<StoredEntry> StoreInto(size_t t, SeqId seq, uint64_t last_use,
                                  uint64_t num_bytes,
                                  const SpillWriteFn& write);
  // Frees room for `num_bytes` of `incoming` in tier `t` by demoting (or,
  // from the last tier, dropping) its least recently used entries.
  Status MakeTierRoom(size_t t, uint64_t num_bytes, SeqId incoming);
  // Moves `entry` from tier `t` to tier t + 1.
  Status Demote(size_t t, const SpillEntryInfo& entry);
  // Discards `entry` from tier `t`, counting and logging it.
  Status Drop(size_t t, const SpillEntryInfo& entry);

  std::vector<std::unique_ptr<SpillTier>> tiers_;  // spill order
  std::vector<TierCounters> counters_;             // [tiers_.size()]
  bool allow_drops_ = true;
};

// Any thread: writes the state file `source` (e.g. an OpenEntry) to `path`
// atomically, synced when `sync`, behind llama.cpp's token header
// (slot_file.h) when `llama_token_header`. Errors as WriteFileAtomically;
// a damaged source's errors as the state reader's.
StatusOr<SaveResult> CopyStateFile(const RandomAccessFile& source, Env* env,
                                   const std::string& path, bool sync,
                                   bool llama_token_header);

}  // namespace kvault

#endif  // KVAULT_KV_SPILL_TIERS_H_
