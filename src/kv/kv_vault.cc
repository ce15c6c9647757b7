// KvVault: creation, bookkeeping, restores and making room in the pool.
// Evicting to the tiers lives in kv_vault_spill.cc, the tiers themselves in
// spill_tiers.cc.
#include "kv/kv_vault.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/ram_tier.h"

namespace kvault {
namespace {

std::string Name(SeqId seq) { return KvVault::SeqLabel(seq); }

// Opens the tiers `options` asks for, in spill order: RAM, then disk.
StatusOr<std::vector<std::unique_ptr<SpillTier>>> OpenTiers(
    Env* env, const KvVaultOptions& options, const KvLayout& layout) {
  std::vector<std::unique_ptr<SpillTier>> tiers;
  if (options.ram_budget_bytes > 0) {
    tiers.push_back(std::make_unique<RamTier>(options.ram_budget_bytes));
  }
  if (!options.disk_dir.empty()) {
    KV_ASSIGN_OR_RETURN(
        std::unique_ptr<DiskTier> disk,
        DiskTier::Open(env, options.disk_dir, options.disk_budget_bytes, layout,
                       options.fingerprint, options.save.sync));
    tiers.push_back(std::move(disk));
  }
  return tiers;
}

// Returns "seq#1 -> ram, seq#2 -> disk".
std::string Describe(const std::vector<Eviction>& evicted) {
  std::string out;
  for (const Eviction& e : evicted) {
    if (!out.empty()) out += ", ";
    out += Name(e.seq) + " -> " + e.tier;
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<KvVault>> KvVault::Create(
    KvCache* cache, const KvVaultOptions& options,
    std::unique_ptr<EvictionPolicy> policy) {
  if (cache == nullptr) return InvalidArgumentError("KvVault: null cache");
  if (cache->storage() == nullptr) {
    return FailedPreconditionError(
        "KvVault: the cache keeps no K/V data (no layout)");
  }
  if (!options.disk_dir.empty() && options.disk_budget_bytes == 0) {
    return InvalidArgumentError("KvVault: disk tier " + options.disk_dir +
                                " needs disk_budget_bytes > 0");
  }
  if (policy == nullptr) policy = MakeLruEvictionPolicy();
  Env* env = options.env != nullptr ? options.env : Env::Default();
  KV_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<SpillTier>> tiers,
                      OpenTiers(env, options, cache->storage()->layout()));
  std::unique_ptr<KvVault> vault(
      new KvVault(cache, env, options, std::move(policy),
                  SpillTiers(std::move(tiers), options.allow_drops)));
  const std::vector<SeqId> recovered = vault->SpilledSequences();
  if (!recovered.empty()) {
    KV_LOG(INFO) << "KvVault: " << recovered.size()
                 << " spilled sequences recovered from " << options.disk_dir;
  }
  return vault;
}

KvVault::KvVault(KvCache* cache, Env* env, const KvVaultOptions& options,
                 std::unique_ptr<EvictionPolicy> policy, SpillTiers spill_tiers)
    : cache_(cache),
      env_(env),
      fingerprint_(options.fingerprint),
      save_options_(options.save),
      policy_(std::move(policy)),
      spill_tiers_(std::move(spill_tiers)) {}

std::string KvVault::SeqLabel(SeqId seq) {
  // Raw scratch ids read as garbage in a log line.
  if (IsScratchSeq(seq)) {
    return "scratch#" + std::to_string(seq.value() - kFirstScratchSeq.value());
  }
  return "seq#" + std::to_string(seq.value());
}

void KvVault::Touch(SeqId seq) { meta_[seq].last_use = ++clock_; }

void KvVault::SetActive(SeqId seq, bool active) { meta_[seq].active = active; }

bool KvVault::IsActive(SeqId seq) const { return MetaOf(seq).active; }

KvVault::SeqMeta KvVault::MetaOf(SeqId seq) const {
  auto it = meta_.find(seq);
  return it != meta_.end() ? it->second : SeqMeta{};
}

StatusOr<VaultRestoreResult> KvVault::Restore(SeqId seq,
                                              const std::string& path) {
  if (IsScratchSeq(seq)) {
    return InvalidArgumentError("restore into " + Name(seq) +
                                ", a reserved restore scratch sequence");
  }
  std::vector<Eviction> evicted;
  StatusOr<RestoreResult> restored = RestoreSequenceFromFile(
      env_, path, fingerprint_, seq, cache_,
      RoomForRestore(seq, kRestoreScratchSeq, &evicted));
  if (restored.ok()) spill_tiers_.DiscardStale(seq, "restored from " + path);
  return FinishRestore(seq, restored, std::move(evicted));
}

StatusOr<std::optional<VaultRestoreResult>> KvVault::EnsureResident(SeqId seq) {
  if (cache_->table().Contains(seq)) {
    return std::optional<VaultRestoreResult>();
  }
  std::optional<size_t> t = spill_tiers_.TierOf(seq);
  if (!t) {
    return NotFoundError(Name(seq) + " is neither resident nor spilled");
  }
  const std::string where = "bringing back " + Name(seq) + " from the " +
                            std::string(spill_tiers_.TierName(*t)) + " tier";
  StatusOr<std::unique_ptr<RandomAccessFile>> file = spill_tiers_.Open(*t, seq);
  if (!file.ok()) return file.status().WithContext(where);
  std::vector<Eviction> evicted;
  StatusOr<RestoreResult> restored =
      RestoreSequence(**file, fingerprint_, seq, cache_,
                      RoomForRestore(seq, kRestoreScratchSeq, &evicted));
  if (restored.ok()) spill_tiers_.BroughtBack(*t, seq, *restored);
  StatusOr<VaultRestoreResult> result =
      FinishRestore(seq, restored, std::move(evicted));
  if (!result.ok()) return result.status().WithContext(where);
  return std::optional<VaultRestoreResult>(std::move(result).value());
}

RestoreOptions KvVault::RoomForRestore(SeqId target, SeqId scratch,
                                       std::vector<Eviction>* evicted) {
  RestoreOptions options;
  options.make_room = [this, target, scratch, evicted](uint64_t num_tokens) {
    const uint64_t num_pages = cache_->table().PagesToGrow(scratch, num_tokens);
    const RoomRequest request{num_pages,
                              {target, scratch},
                              target,
                              "restore into " + Name(target) + " needs " +
                                  std::to_string(num_tokens) + " cells (" +
                                  std::to_string(num_pages) + " pages)"};
    return MakeRoomFor(request, evicted);
  };
  // No tier could take the target's old KV: the restore may still replace
  // it in place, verifying the whole file before the old cells go.
  options.reuse_target_pages = true;
  return options;
}

StatusOr<VaultRestoreResult> KvVault::FinishRestore(
    SeqId seq, const StatusOr<RestoreResult>& restored,
    std::vector<Eviction> evicted) {
  last_evictions_ = evicted;
  if (!restored.ok()) {
    ++restores_failed_;
    if (evicted.empty()) return restored.status();
    return restored.status().WithContext("after evicting " + Describe(evicted) +
                                         " (they stay spilled)");
  }
  ++restores_ok_;
  Touch(seq);
  VaultRestoreResult result;
  static_cast<RestoreResult&>(result) = *restored;
  result.evicted = std::move(evicted);
  return result;
}

Status KvVault::MakeRoom(uint64_t num_pages, std::span<const SeqId> protect) {
  const RoomRequest request{
      num_pages,
      {protect.begin(), protect.end()},
      std::nullopt,
      "making room for " + std::to_string(num_pages) + " pages"};
  std::vector<Eviction> evicted;
  Status status = MakeRoomFor(request, &evicted);
  last_evictions_ = std::move(evicted);
  return status;
}

// The room ladder, in the manner of LevelDB's MakeRoomForWrite: every turn
// takes the first rung that applies, and only the last one gives up.
Status KvVault::MakeRoomFor(const RoomRequest& request,
                            std::vector<Eviction>* evicted) {
  std::vector<SeqId> order;  // what to evict, in turn
  bool checked = false;
  size_t next = 0;
  Status first_error;
  while (true) {
    if (CanPlace(request.num_pages)) {
      return Status::Ok();
    } else if (!checked) {
      // Check first: nothing moves unless evicting would be enough.
      order = Candidates(request.protect);
      KV_RETURN_IF_ERROR(CheckRoomReachable(request, &order, evicted));
      checked = true;
    } else if (next < order.size()) {
      const SeqId seq = order[next++];
      StatusOr<Eviction> eviction = EvictForRoom(seq, request);
      if (eviction.ok()) {
        evicted->push_back(*eviction);
        continue;
      }
      // The sequence stays resident; later candidates may still free enough.
      KV_LOG(WARNING) << request.need << ": could not evict " << Name(seq)
                      << ": " << eviction.status();
      if (first_error.ok()) first_error = eviction.status();
    } else if (!first_error.ok()) {
      return first_error.WithContext(request.need + ": evicting");
    } else {
      return ResourceExhaustedError(
          request.need + "; no room after evicting " +
          std::to_string(evicted->size()) + " sequences: " +
          cache_->table().policy().DescribeFailure(
              cache_->pool(), static_cast<uint32_t>(request.num_pages)));
    }
  }
}

Status KvVault::CheckRoomReachable(const RoomRequest& request,
                                   std::vector<SeqId>* order,
                                   std::vector<Eviction>* evicted) {
  const uint64_t num_free = cache_->pool().num_free_pages();
  const uint64_t evictable = PagesFreedByEvicting(*order);
  const bool own = request.own.has_value() && Spillable(*request.own);
  if (num_free + evictable >= request.num_pages) {
    // The target's pages are the last resort should evictions fail.
    if (own) order->push_back(*request.own);
    return Status::Ok();
  }
  const Status short_of_room = ResourceExhaustedError(
      request.need + "; free " + std::to_string(num_free) +
      " pages, evictable " + std::to_string(evictable) + " pages");
  if (!own) return short_of_room;
  std::vector<SeqId> with_own = *order;
  with_own.push_back(*request.own);
  if (num_free + PagesFreedByEvicting(with_own) < request.num_pages) {
    return short_of_room;
  }
  // Only with the target's own pages is it enough: they go first (a failed
  // restore leaves them spilled, to come back on the slot's next use; a
  // commit discards the copy).
  StatusOr<Eviction> spilled = EvictForRoom(*request.own, request);
  if (!spilled.ok()) {
    return short_of_room.WithContext(
        "spilling the target's own KV failed too (" +
        std::string(spilled.status().message()) + ")");
  }
  evicted->push_back(*spilled);
  return Status::Ok();
}

StatusOr<Eviction> KvVault::EvictForRoom(SeqId seq,
                                         const RoomRequest& request) {
  if (seq != request.own) return Evict(seq);
  // The engine marks a restore's target active against other evictions;
  // the restore itself may move it out.
  const bool active = MetaOf(seq).active;
  meta_[seq].active = false;
  StatusOr<Eviction> evicted = Evict(seq);
  meta_[seq].active = active;
  return evicted;
}

bool KvVault::CanPlace(uint64_t num_pages) const {
  const PagePool& pool = cache_->pool();
  if (num_pages > pool.num_free_pages()) return false;
  // Such an Append defragments when a placement fails: free pages suffice.
  if (cache_->MayMoveCellsOnAppend()) return true;
  return cache_->table()
      .policy()
      .Choose(pool, static_cast<uint32_t>(num_pages))
      .has_value();
}

std::vector<SeqId> KvVault::Candidates(std::span<const SeqId> protect) const {
  std::vector<SeqUsage> usages;
  for (SeqId seq : cache_->table().SequenceIds()) {
    if (IsScratchSeq(seq) ||
        std::find(protect.begin(), protect.end(), seq) != protect.end()) {
      continue;
    }
    const uint64_t num_cells = cache_->table().Length(seq);
    if (num_cells == 0 || !Spillable(seq)) continue;
    const SeqMeta meta = MetaOf(seq);
    usages.push_back(SeqUsage{seq, meta.last_use, num_cells, meta.active});
  }
  std::vector<SeqId> order;
  for (SeqId seq : policy_->EvictionOrder(usages)) {
    if (!MetaOf(seq).active) order.push_back(seq);  // whatever the policy says
  }
  return order;
}

bool KvVault::Spillable(SeqId seq) const {
  return cache_->table().Contains(seq) &&
         StateBytes(seq) <= spill_tiers_.MaxTierBudget();
}

uint64_t KvVault::PagesFreedByEvicting(std::span<const SeqId> seqs) const {
  // A shared page frees only when every sequence holding it goes.
  std::unordered_map<uint32_t, uint32_t> holders;  // page -> evicted holders
  for (SeqId seq : seqs) {
    for (PageId page : cache_->table().Pages(seq)) ++holders[page.value()];
  }
  uint64_t num_freed = 0;
  for (const auto& [page, count] : holders) {
    if (count == cache_->pool().RefCount(PageId(page))) ++num_freed;
  }
  return num_freed;
}

Status KvVault::Erase(SeqId seq) {
  if (IsScratchSeq(seq)) {
    // Its cells belong to a restore in flight.
    return InvalidArgumentError("erase " + Name(seq) +
                                ": a reserved restore scratch sequence");
  }
  cache_->RemoveSequence(seq);
  meta_.erase(seq);
  return spill_tiers_.Erase(seq).WithContext("erasing " + Name(seq));
}

bool KvVault::IsSpilled(SeqId seq) const {
  return !cache_->table().Contains(seq) && spill_tiers_.TierOf(seq).has_value();
}

std::vector<SeqId> KvVault::SpilledSequences() const {
  std::vector<SeqId> out;
  for (SeqId seq : spill_tiers_.Sequences()) {
    if (!cache_->table().Contains(seq)) out.push_back(seq);
  }
  return out;
}

VaultStats KvVault::Stats() const {
  VaultStats stats;
  stats.tiers = spill_tiers_.Stats();
  stats.restores_ok = restores_ok_;
  stats.restores_failed = restores_failed_;
  stats.evictions = evictions_;
  return stats;
}

}  // namespace kvault
