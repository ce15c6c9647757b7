// KvVault: keeps every sequence's KV somewhere, so nothing is silently lost
// when the pool runs short. It wraps a KvCache and a list of spill tiers
// (host RAM, then disk). When a restore (or the engine) needs pages, idle
// sequences are evicted in the eviction policy's order (LRU by default):
// each is written as a state file to the first tier with room and only then
// removed from the cache. A full RAM tier demotes its least recently used
// entries to disk; only when every tier is over budget is the least recently
// used spilled entry dropped, which is counted and logged. A spilled
// sequence comes back through the same validated restore path as a user's
// saved slot (EnsureResident), without recompute. Which tier takes an
// entry and what is demoted or dropped for it are decided by SpillTiers
// (spill_tiers.h), which owns the tiers; which idle sequences leave the pool
// to make room is decided by RoomPlanner (room_planner.h) from the cache's
// bookkeeping; the vault executes both and decides when.
//
// Atomicity: a restore checks that free pages plus the pages evicting every
// candidate would free can hold it before it evicts anything; a failed
// restore leaves the target as it was, and sequences evicted for it stay
// safely spilled (reported in the error and last_evictions()). A failed
// spill leaves the sequence resident and unchanged. The target's own pages
// count as room: it is spilled first when a tier can take it, otherwise
// the file is verified whole into a host buffer and replaces the target in
// place (RestoreOptions::reuse_target_pages). A restore never drops KV.
//
// Single-threaded: the caller serialises every call (and every use of the
// wrapped cache while a call runs). The one exception is the I/O of an
// asynchronous restore or save (BeginRestore / SnapshotForSave with
// restore_job.h), which may run on another thread between the owner-thread
// calls that bracket it. Scratch ids (IsScratchSeq) are never evicted,
// saved, erased or counted as candidates.
#ifndef KVAULT_KV_KV_VAULT_H_
#define KVAULT_KV_KV_VAULT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/eviction_policy.h"
#include "kv/kv_cache.h"
#include "kv/model_fingerprint.h"
#include "kv/restore_job.h"
#include "kv/room_planner.h"
#include "kv/spill_tiers.h"
#include "kv/state_file.h"

namespace kvault {

struct KvVaultOptions {
  Env* env = nullptr;  // null: Env::Default()
  ModelFingerprint fingerprint;
  uint64_t ram_budget_bytes = 0;  // 0: no RAM tier
  std::string disk_dir;           // empty: no disk tier
  uint64_t disk_budget_bytes = 0;
  // How state files are written (user saves and spills alike; sync=false
  // also makes the disk tier skip its fsyncs).
  SaveOptions save;
  // When every tier is over budget: true drops the least recently used
  // spilled entry (counted); false refuses the spill instead
  // (ResourceExhausted), so no spilled KV is ever lost.
  bool allow_drops = true;
  // Threads each restore reads its chunks with (RestoreOptions::
  // num_threads): spill tiers and user restores alike.
  uint32_t restore_threads = 2;
};

// One sequence moved out of the pool.
struct Eviction {
  SeqId seq;
  std::string tier;  // "ram" or "disk": where it was written (may move later)
  uint64_t num_tokens = 0;
  uint64_t num_bytes = 0;
  friend bool operator==(const Eviction&, const Eviction&) = default;
};

// A restore's result plus the sequences evicted to make room for it.
struct VaultRestoreResult : RestoreResult {
  std::vector<Eviction> evicted;
};

struct VaultStats {
  std::vector<TierStats> tiers;  // in spill order
  uint64_t restores_ok = 0;      // Restore and EnsureResident bring-backs
  uint64_t restores_failed = 0;
  uint64_t evictions = 0;
};

class KvVault {
 public:
  // Wraps `cache` (not owned; must outlive the vault and keep K/V data) and
  // opens the tiers `options` asks for; the disk tier's recovered entries
  // are spilled sequences from the start. `policy` null: LRU.
  static StatusOr<std::unique_ptr<KvVault>> Create(
      KvCache* cache, const KvVaultOptions& options,
      std::unique_ptr<EvictionPolicy> policy = nullptr);

  // Marks `seq` as used now (the LRU clock).
  void Touch(SeqId seq);
  // Marks `seq` as in use by a running request (never evicted) or idle.
  void SetActive(SeqId seq, bool active);
  // Returns whether `seq` is marked active.
  bool IsActive(SeqId seq) const;

  // Saves `seq` durably to `path`: a resident seq from the cache, a spilled
  // one by copying its tier entry. NotFound when it is neither.
  StatusOr<SaveResult> Save(SeqId seq, const std::string& path);
  // Restores the state file at `path` into `seq`, evicting idle sequences
  // and reusing `seq`'s own pages when short (see the file comment).
  // ResourceExhausted naming needed vs available pages when even that is
  // not enough.
  // On success a spilled copy of `seq` is discarded (it is stale).
  StatusOr<VaultRestoreResult> Restore(SeqId seq, const std::string& path);
  // --- Asynchronous restore and save (kv_vault_async.cc) ------------------
  // Owner thread: Restore up to the I/O. Validates the state file and
  // reserves its cells under `scratch` (IsScratchSeq, one per job in
  // flight), evicting idle LRU sequences (never `seq`, active or scratch
  // ones) when short, exactly as Restore does (check-first, same errors).
  // Sets last_evictions(). Run job->Load() on any thread, then pass the job
  // to EndRestore. A failure is booked as a failed restore at once (no
  // EndRestore then).
  // `file` is the file at `path` as opened (e.g. a PrefetchedFile opened on
  // an I/O thread, so that this call reads only memory); a failed open is
  // booked as a failed restore like any other.
  StatusOr<std::unique_ptr<RestoreJob>> BeginRestore(
      SeqId seq, StatusOr<std::unique_ptr<RandomAccessFile>> file,
      const std::string& path, SeqId scratch);
  // Owner thread: commits `job` whose Load returned `load_status` (aborts it
  // when not OK) and books it like Restore: counters, last_evictions(),
  // Touch, a stale spilled copy of the target discarded. Returns what
  // Restore would (errors prefixed with the path).
  StatusOr<VaultRestoreResult> EndRestore(std::unique_ptr<RestoreJob> job,
                                          const Status& load_status);
  // Owner thread: the snapshot for an async save (WriteSnapshotToFile with
  // env(), cache().storage(), save_options()) of the resident `seq`;
  // NotFound when it is not resident. Mark `seq` active until the write
  // returns, so that it is not evicted meanwhile.
  StatusOr<SaveSnapshot> SnapshotForSave(SeqId seq) const;
  // Owner thread: the spilled `seq`'s tier entry for an async save
  // (CopyStateFile with env() and save_options()), readable on any thread
  // whatever the tiers do meanwhile; NotFound when it is not spilled.
  StatusOr<std::unique_ptr<RandomAccessFile>> OpenSpilledForSave(SeqId seq);
  // Returns the Env state files are written and read with.
  Env* env() const { return env_; }
  // Returns how named saves (Save, async saves) are written: the vault's
  // SaveOptions with llama.cpp's token header (slot_file.h).
  const SaveOptions& save_options() const { return slot_file_options_; }
  // Returns the model fingerprint files are written and checked with.
  const ModelFingerprint& fingerprint() const { return fingerprint_; }
  // Returns the wrapped cache.
  const KvCache& cache() const { return *cache_; }

  // Spills the resident, idle `seq` to the first tier with room (demoting or
  // dropping older entries as needed), then removes it from the cache.
  // FailedPrecondition when it is active; ResourceExhausted when it is
  // larger than every tier's budget; on error it stays resident.
  StatusOr<Eviction> Evict(SeqId seq);
  // Brings a spilled `seq` back into the cache (may evict others); nullopt
  // when it is already resident, NotFound when it is neither. On failure
  // the tier entry stays.
  StatusOr<std::optional<VaultRestoreResult>> EnsureResident(SeqId seq);
  // Evicts idle sequences (not active, not scratch, not in `protect`) in
  // the eviction policy's order until `num_pages` pages can be placed: that
  // many free pages (under contiguous placement, one run of them).
  // ResourceExhausted, evicting nothing, when even evicting every candidate
  // would not free enough. Sets last_evictions().
  Status MakeRoom(uint64_t num_pages, std::span<const SeqId> protect = {});
  // Drops `seq` from the cache and every tier (an explicit user erase).
  Status Erase(SeqId seq);

  // Returns true when `seq` is not resident but held by a tier.
  bool IsSpilled(SeqId seq) const;
  // Returns the ids of the spilled sequences, ascending.
  std::vector<SeqId> SpilledSequences() const;
  // Returns the sequences evicted by the last Restore, BeginRestore,
  // EndRestore (the same as its BeginRestore's), EnsureResident or MakeRoom,
  // also when it failed.
  const std::vector<Eviction>& last_evictions() const {
    return last_evictions_;
  }
  // Returns per-tier and overall counters.
  VaultStats Stats() const;

 private:
  struct SeqMeta {
    uint64_t last_use = 0;
    bool active = false;
  };

  KvVault(KvCache* cache, Env* env, const KvVaultOptions& options,
          std::unique_ptr<EvictionPolicy> policy, SpillTiers spill_tiers);

  // Returns restore options whose make_room makes room for a restore into
  // `target` reserving under `scratch`, recording evictions in `*evicted`.
  RestoreOptions RoomForRestore(SeqId target, SeqId scratch,
                                std::vector<Eviction>* evicted);
  // Books a finished restore into `seq`: counters, last_evictions(), Touch;
  // on failure adds the evictions to the error.
  StatusOr<VaultRestoreResult> FinishRestore(
      SeqId seq, const StatusOr<RestoreResult>& restored,
      std::vector<Eviction> evicted);
  // Returns `seq`'s LRU stamp and active flag (defaults when unknown).
  SeqMeta MetaOf(SeqId seq) const;

  // --- Evicting (kv_vault_spill.cc) ---------------------------------------
  // The room ladder: evicts what a RoomPlanner picks until
  // request.num_pages can be placed, appending each eviction to `evicted`.
  Status MakeRoomFor(const RoomRequest& request,
                     std::vector<Eviction>* evicted);
  // Evicts `seq` for `request` (its own target even when marked active).
  StatusOr<Eviction> EvictForRoom(SeqId seq, const RoomRequest& request);

  KvCache* cache_;
  Env* env_;
  ModelFingerprint fingerprint_;
  SaveOptions save_options_;       // spills
  SaveOptions slot_file_options_;  // named saves
  uint32_t restore_threads_;
  std::unique_ptr<EvictionPolicy> policy_;
  SpillTiers spill_tiers_;
  std::map<SeqId, SeqMeta> meta_;
  uint64_t clock_ = 0;
  uint64_t restores_ok_ = 0;
  uint64_t restores_failed_ = 0;
  uint64_t evictions_ = 0;
  std::vector<Eviction> last_evictions_;
  // What EndRestore books for a job in flight, by scratch id.
  struct PendingRestore {
    std::string path;
    std::vector<Eviction> evicted;
  };
  std::map<SeqId, PendingRestore> pending_restores_;
};

}  // namespace kvault

#endif  // KVAULT_KV_KV_VAULT_H_
