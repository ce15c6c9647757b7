// KvVault: creation, bookkeeping and restores. Evicting to the tiers (one
// sequence, or as many as making room takes) lives in kv_vault_spill.cc,
// the tiers themselves in spill_tiers.cc, the choice of what to evict for
// room in room_planner.cc.
#include "kv/kv_vault.h"

#include <string>
#include <utility>

#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/ram_tier.h"
#include "kv/slot_file.h"

namespace kvault {
namespace {

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
    out += SeqLabel(e.seq) + " -> " + e.tier;
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
      slot_file_options_(options.save),
      restore_threads_(options.restore_threads),
      policy_(std::move(policy)),
      spill_tiers_(std::move(spill_tiers)) {
  slot_file_options_.llama_token_header = true;
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
    return InvalidArgumentError("restore into " + SeqLabel(seq) +
                                ", a reserved restore scratch sequence");
  }
  std::vector<Eviction> evicted;
  StatusOr<OpenedSlotFile> file = OpenSlotFile(env_, path);
  StatusOr<RestoreResult> restored =
      file.ok()
          ? RestoreSequence(*file->state, fingerprint_, seq, cache_,
                            RoomForRestore(seq, kRestoreScratchSeq, &evicted))
          : StatusOr<RestoreResult>(file.status());
  if (restored.ok()) {
    restored->bytes_read += file->header_bytes;
  } else {
    restored = restored.status().WithContext(path);
  }
  if (restored.ok()) spill_tiers_.DiscardStale(seq, "restored from " + path);
  return FinishRestore(seq, restored, std::move(evicted));
}

StatusOr<std::optional<VaultRestoreResult>> KvVault::EnsureResident(SeqId seq) {
  if (cache_->table().Contains(seq)) {
    return std::optional<VaultRestoreResult>();
  }
  std::optional<size_t> t = spill_tiers_.TierOf(seq);
  if (!t) {
    return NotFoundError(SeqLabel(seq) + " is neither resident nor spilled");
  }
  const std::string where = "bringing back " + SeqLabel(seq) + " from the " +
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
                              "restore into " + SeqLabel(target) + " needs " +
                                  std::to_string(num_tokens) + " cells (" +
                                  std::to_string(num_pages) + " pages)"};
    return MakeRoomFor(request, evicted);
  };
  // No tier could take the target's old KV: the restore may still replace
  // it in place, verifying the whole file before the old cells go.
  options.reuse_target_pages = true;
  options.num_threads = restore_threads_;
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

Status KvVault::Erase(SeqId seq) {
  if (IsScratchSeq(seq)) {
    // Its cells belong to a restore in flight.
    return InvalidArgumentError("erase " + SeqLabel(seq) +
                                ": a reserved restore scratch sequence");
  }
  cache_->RemoveSequence(seq);
  meta_.erase(seq);
  return spill_tiers_.Erase(seq).WithContext("erasing " + SeqLabel(seq));
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
