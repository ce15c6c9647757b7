// KvVault: spilling sequences to the tiers, demoting and dropping entries,
// and saving a sequence wherever it lives.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/kv_vault.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

constexpr uint64_t kCopyBufferBytes = uint64_t{1} << 20;

std::string Name(SeqId seq) { return KvVault::SeqLabel(seq); }

// Copies all of `in` to `out`; returns the bytes copied.
StatusOr<uint64_t> CopyFile(const RandomAccessFile& in, WritableFile* out) {
  std::vector<std::byte> buffer(std::min(kCopyBufferBytes, in.size()));
  uint64_t offset = 0;
  while (offset < in.size()) {
    const size_t want = std::min<uint64_t>(buffer.size(), in.size() - offset);
    KV_ASSIGN_OR_RETURN(size_t got,
                        in.ReadAt(offset, std::span(buffer.data(), want)));
    if (got == 0) {
      return CorruptionError("copy: entry shrank to " + std::to_string(offset) +
                             " bytes, expected " + std::to_string(in.size()))
          .WithReason(kReasonTruncated);
    }
    KV_RETURN_IF_ERROR(out->Append(std::span(buffer.data(), got)));
    offset += got;
  }
  return offset;
}

// Returns the bytes of `seq`'s entry in `tier` (0 when absent).
uint64_t EntryBytes(const SpillTier& tier, SeqId seq) {
  for (const SpillEntryInfo& e : tier.Entries()) {
    if (e.seq == seq) return e.num_bytes;
  }
  return 0;
}

}  // namespace

uint64_t KvVault::StateBytes(SeqId seq) const {
  StateHeader header;
  header.layout = cache_->storage()->layout();
  header.num_tokens = cache_->table().Length(seq);
  header.tokens_per_chunk =
      ChooseTokensPerChunk(header.layout, save_options_.target_chunk_bytes);
  return header.file_bytes();
}

uint64_t KvVault::MaxTierBudget() const {
  uint64_t max_budget = 0;
  for (const auto& tier : tiers_) {
    max_budget = std::max(max_budget, tier->budget_bytes());
  }
  return max_budget;
}

std::optional<size_t> KvVault::TierOf(SeqId seq) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (tiers_[t]->Contains(seq)) return t;
  }
  return std::nullopt;
}

StatusOr<Eviction> KvVault::Evict(SeqId seq) {
  if (IsScratchSeq(seq) || !cache_->table().Contains(seq)) {
    return NotFoundError("evict: " + Name(seq) + " is not resident");
  }
  if (IsActive(seq)) {
    return FailedPreconditionError("evict: " + Name(seq) + " is active");
  }
  const uint64_t num_bytes = StateBytes(seq);
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (num_bytes <= tiers_[t]->budget_bytes()) {
      return SpillInto(t, seq, num_bytes);
    }
  }
  std::string budgets;
  for (const auto& tier : tiers_) {
    budgets += (budgets.empty() ? "" : ", ") + std::string(tier->name()) + " " +
               std::to_string(tier->budget_bytes());
  }
  return ResourceExhaustedError("evict " + Name(seq) + ": its state of " +
                                std::to_string(num_bytes) +
                                " bytes exceeds every tier budget (" +
                                (budgets.empty() ? "no tiers" : budgets) + ")");
}

StatusOr<Eviction> KvVault::SpillInto(size_t t, SeqId seq, uint64_t num_bytes) {
  SpillTier& tier = *tiers_[t];
  const std::string where =
      "evict " + Name(seq) + " to the " + std::string(tier.name()) + " tier";
  KV_RETURN_IF_ERROR(MakeTierRoom(t, num_bytes, seq).WithContext(where));
  StatusOr<SpillEntryInfo> info =
      tier.Put(seq, MetaOf(seq).last_use, [this, seq](WritableFile* out) {
        return WriteSequenceState(*cache_, seq, fingerprint_, save_options_,
                                  out);
      });
  if (!info.ok()) return info.status().WithContext(where);
  // Committed: the tier holds a validated copy, so the pages may go.
  for (size_t other = 0; other < tiers_.size(); ++other) {
    if (other == t) continue;
    Status stale = tiers_[other]->Remove(seq);  // an older copy, if any
    if (!stale.ok()) {
      KV_LOG(WARNING) << where << ": removing the stale copy in the "
                      << tiers_[other]->name() << " tier failed: " << stale;
    }
  }
  cache_->RemoveSequence(seq);
  ++counters_[t].num_spills;
  counters_[t].spilled_bytes += info->num_bytes;
  ++evictions_;
  KV_LOG(INFO) << "evicted " << Name(seq) << " (" << info->num_tokens
               << " tokens, " << info->num_bytes << " bytes) to the "
               << tier.name() << " tier";
  return Eviction{seq, std::string(tier.name()), info->num_tokens,
                  info->num_bytes};
}

Status KvVault::MakeTierRoom(size_t t, uint64_t num_bytes, SeqId incoming) {
  SpillTier& tier = *tiers_[t];
  KV_CHECK_LE(num_bytes, tier.budget_bytes());
  const uint64_t replaced = EntryBytes(tier, incoming);
  while (tier.used_bytes() - replaced + num_bytes > tier.budget_bytes()) {
    std::vector<SpillEntryInfo> entries = tier.Entries();
    auto victim =
        std::find_if(entries.begin(), entries.end(),
                     [&](const auto& e) { return e.seq != incoming; });
    KV_CHECK(victim != entries.end()) << "over budget with no other entry";
    const bool next_fits = t + 1 < tiers_.size() &&
                           victim->num_bytes <= tiers_[t + 1]->budget_bytes();
    if (!next_fits && !allow_drops_) {
      return ResourceExhaustedError(
          "the " + std::string(tier.name()) + " tier is full (" +
          std::to_string(tier.used_bytes()) + " of " +
          std::to_string(tier.budget_bytes()) + " bytes used, " +
          std::to_string(num_bytes) +
          " more needed) and dropping spilled KV is off");
    }
    KV_RETURN_IF_ERROR(next_fits ? Demote(t, *victim) : Drop(t, *victim));
  }
  return Status::Ok();
}

Status KvVault::Demote(size_t t, const SpillEntryInfo& entry) {
  SpillTier& from = *tiers_[t];
  SpillTier& to = *tiers_[t + 1];
  const std::string where = "demote " + Name(entry.seq) + " from the " +
                            std::string(from.name()) + " tier to the " +
                            std::string(to.name()) + " tier";
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                      from.Open(entry.seq));
  KV_RETURN_IF_ERROR(
      MakeTierRoom(t + 1, entry.num_bytes, entry.seq).WithContext(where));
  const RandomAccessFile& source = *file;
  StatusOr<SpillEntryInfo> info =
      to.Put(entry.seq, entry.last_use,
             [&source](WritableFile* out) { return CopyFile(source, out); });
  if (!info.ok()) return info.status().WithContext(where);
  KV_RETURN_IF_ERROR(from.Remove(entry.seq).WithContext(where));
  ++counters_[t].num_demotions;
  ++counters_[t + 1].num_spills;
  counters_[t + 1].spilled_bytes += info->num_bytes;
  KV_LOG(INFO) << "demoted " << Name(entry.seq) << " (" << info->num_bytes
               << " bytes) from the " << from.name() << " tier to the "
               << to.name() << " tier";
  return Status::Ok();
}

Status KvVault::Drop(size_t t, const SpillEntryInfo& entry) {
  SpillTier& tier = *tiers_[t];
  KV_RETURN_IF_ERROR(tier.Remove(entry.seq).WithContext(
      "drop " + Name(entry.seq) + " from the " + std::string(tier.name()) +
      " tier"));
  ++counters_[t].num_drops;
  counters_[t].dropped_bytes += entry.num_bytes;
  KV_LOG(WARNING) << "dropped " << Name(entry.seq) << " (" << entry.num_tokens
                  << " tokens, " << entry.num_bytes << " bytes) from the "
                  << tier.name()
                  << " tier: every tier is over budget; its KV is lost and "
                     "must be recomputed";
  return Status::Ok();
}

StatusOr<SaveResult> KvVault::Save(SeqId seq, const std::string& path) {
  if (IsScratchSeq(seq)) {
    // Its cells may be half loaded by a restore in flight.
    return NotFoundError("save " + Name(seq) + " to " + path +
                         ": a restore scratch sequence");
  }
  if (cache_->table().Contains(seq)) {
    return SaveSequenceToFile(env_, *cache_, seq, fingerprint_, path,
                              save_options_);
  }
  std::optional<size_t> t = TierOf(seq);
  if (!t) {
    return NotFoundError("save " + Name(seq) + " to " + path +
                         ": neither resident nor spilled");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string where = "save " + Name(seq) + " from the " +
                            std::string(tiers_[*t]->name()) + " tier";
  StatusOr<std::unique_ptr<RandomAccessFile>> file = tiers_[*t]->Open(seq);
  if (!file.ok()) return file.status().WithContext(where);
  const RandomAccessFile& source = **file;
  StatusOr<uint64_t> written = WriteFileAtomically(
      env_, path,
      [&source](WritableFile* out) { return CopyFile(source, out); },
      save_options_.sync);
  if (!written.ok()) return written.status().WithContext(where);
  SaveResult result;
  for (const SpillEntryInfo& e : tiers_[*t]->Entries()) {
    if (e.seq == seq) result.num_tokens = e.num_tokens;
  }
  result.bytes_written = *written;
  result.elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  return result;
}

}  // namespace kvault
