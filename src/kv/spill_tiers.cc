// SpillTiers: storing state files into the tiers, demoting and dropping
// entries to make room, and copying or removing entries.
#include "kv/spill_tiers.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "kv/disk_tier.h"
#include "kv/kv_vault.h"
#include "kv/slot_file.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

constexpr uint64_t kCopyBufferBytes = uint64_t{1} << 20;

// Messages name sequences as the vault does.
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

SpillTiers::SpillTiers(std::vector<std::unique_ptr<SpillTier>> tiers,
                       bool allow_drops)
    : tiers_(std::move(tiers)),
      counters_(tiers_.size()),
      allow_drops_(allow_drops) {}

std::optional<size_t> SpillTiers::TierOf(SeqId seq) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (tiers_[t]->Contains(seq)) return t;
  }
  return std::nullopt;
}

std::string_view SpillTiers::TierName(size_t t) const {
  return tiers_[t]->name();
}

uint64_t SpillTiers::MaxTierBudget() const {
  uint64_t max_budget = 0;
  for (const auto& tier : tiers_) {
    max_budget = std::max(max_budget, tier->budget_bytes());
  }
  return max_budget;
}

std::vector<SeqId> SpillTiers::Sequences() const {
  std::vector<SeqId> out;
  for (const auto& tier : tiers_) {
    for (const SpillEntryInfo& e : tier->Entries()) out.push_back(e.seq);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StatusOr<StoredEntry> SpillTiers::Store(SeqId seq, uint64_t last_use,
                                        uint64_t num_bytes,
                                        const SpillWriteFn& write) {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (num_bytes <= tiers_[t]->budget_bytes()) {
      return StoreInto(t, seq, last_use, num_bytes, write);
    }
  }
  std::string budgets;
  for (const auto& tier : tiers_) {
    budgets += (budgets.empty() ? "" : ", ") + std::string(tier->name()) + " " +
               std::to_string(tier->budget_bytes());
  }
  return ResourceExhaustedError("evict " + SeqLabel(seq) + ": its state of " +
                                std::to_string(num_bytes) +
                                " bytes exceeds every tier budget (" +
                                (budgets.empty() ? "no tiers" : budgets) + ")");
}

StatusOr<StoredEntry> SpillTiers::StoreInto(size_t t, SeqId seq,
                                            uint64_t last_use,
                                            uint64_t num_bytes,
                                            const SpillWriteFn& write) {
  SpillTier& tier = *tiers_[t];
  const std::string where = "evict " + SeqLabel(seq) + " to the " +
                            std::string(tier.name()) + " tier";
  KV_RETURN_IF_ERROR(MakeTierRoom(t, num_bytes, seq).WithContext(where));
  StatusOr<SpillEntryInfo> info = tier.Put(seq, last_use, write);
  if (!info.ok()) return info.status().WithContext(where);
  for (size_t other = 0; other < tiers_.size(); ++other) {
    if (other == t) continue;
    Status stale = tiers_[other]->Remove(seq);  // an older copy, if any
    if (!stale.ok()) {
      KV_LOG(WARNING) << where << ": removing the stale copy in the "
                      << tiers_[other]->name() << " tier failed: " << stale;
    }
  }
  ++counters_[t].num_spills;
  counters_[t].spilled_bytes += info->num_bytes;
  return StoredEntry{std::string(tier.name()), *info};
}

Status SpillTiers::MakeTierRoom(size_t t, uint64_t num_bytes, SeqId incoming) {
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

Status SpillTiers::Demote(size_t t, const SpillEntryInfo& entry) {
  SpillTier& from = *tiers_[t];
  SpillTier& to = *tiers_[t + 1];
  const std::string where = "demote " + SeqLabel(entry.seq) + " from the " +
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
  KV_LOG(INFO) << "demoted " << SeqLabel(entry.seq) << " (" << info->num_bytes
               << " bytes) from the " << from.name() << " tier to the "
               << to.name() << " tier";
  return Status::Ok();
}

Status SpillTiers::Drop(size_t t, const SpillEntryInfo& entry) {
  SpillTier& tier = *tiers_[t];
  KV_RETURN_IF_ERROR(tier.Remove(entry.seq).WithContext(
      "drop " + SeqLabel(entry.seq) + " from the " + std::string(tier.name()) +
      " tier"));
  ++counters_[t].num_drops;
  counters_[t].dropped_bytes += entry.num_bytes;
  KV_LOG(WARNING) << "dropped " << SeqLabel(entry.seq) << " ("
                  << entry.num_tokens << " tokens, " << entry.num_bytes
                  << " bytes) from the " << tier.name()
                  << " tier: every tier is over budget; its KV is lost and "
                     "must be recomputed";
  return Status::Ok();
}

StatusOr<std::unique_ptr<RandomAccessFile>> SpillTiers::Open(size_t t,
                                                             SeqId seq) {
  return tiers_[t]->Open(seq);
}

void SpillTiers::BroughtBack(size_t t, SeqId seq,
                             const RestoreResult& restored) {
  ++counters_[t].num_bring_backs;
  KV_LOG(INFO) << "brought back " << SeqLabel(seq) << " ("
               << restored.num_tokens << " tokens, " << restored.bytes_read
               << " bytes) from the " << tiers_[t]->name() << " tier";
  DiscardStale(seq, "brought back");
}

StatusOr<std::unique_ptr<RandomAccessFile>> SpillTiers::OpenEntry(SeqId seq) {
  std::optional<size_t> t = TierOf(seq);
  if (!t) return NotFoundError(SeqLabel(seq) + " is not spilled");
  StatusOr<std::unique_ptr<RandomAccessFile>> file = tiers_[*t]->Open(seq);
  if (!file.ok()) {
    return file.status().WithContext("opening " + SeqLabel(seq) + " in the " +
                                     std::string(tiers_[*t]->name()) + " tier");
  }
  return file;
}

StatusOr<SaveResult> SpillTiers::CopyTo(SeqId seq, Env* env,
                                        const std::string& path, bool sync,
                                        bool llama_token_header) {
  StatusOr<std::unique_ptr<RandomAccessFile>> file = OpenEntry(seq);
  if (!file.ok()) return file.status().WithContext("save to " + path);
  return CopyStateFile(**file, env, path, sync, llama_token_header);
}

StatusOr<SaveResult> CopyStateFile(const RandomAccessFile& source, Env* env,
                                   const std::string& path, bool sync,
                                   bool llama_token_header) {
  const auto start = std::chrono::steady_clock::now();
  const std::string where = "save to " + path;
  StatusOr<state_internal::ValidatedFile> v =
      state_internal::ReadHeaderAndTrailer(source);
  if (!v.ok()) return v.status().WithContext(where);
  std::string header;
  if (llama_token_header) {
    std::vector<TokenPos> tokens;
    uint64_t checksum = 0;
    Status read =
        state_internal::ReadTokenTable(source, v->header, &tokens, &checksum);
    if (!read.ok()) return read.WithContext(where);
    header = EncodeSlotFileHeader(tokens);
  }
  StatusOr<uint64_t> written = WriteFileAtomically(
      env, path,
      [&source, &header](WritableFile* out) -> StatusOr<uint64_t> {
        if (!header.empty()) KV_RETURN_IF_ERROR(out->Append(header));
        KV_ASSIGN_OR_RETURN(uint64_t n, CopyFile(source, out));
        return n + header.size();
      },
      sync);
  if (!written.ok()) return written.status().WithContext(where);
  SaveResult result;
  result.num_tokens = v->header.num_tokens;
  result.bytes_written = *written;
  result.elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  return result;
}

void SpillTiers::DiscardStale(SeqId seq, std::string_view why) {
  for (auto& tier : tiers_) {
    Status removed = tier->Remove(seq);
    if (!removed.ok()) {
      // Only a stale copy is left behind; it occupies budget until replaced.
      KV_LOG(WARNING) << SeqLabel(seq) << " " << why << ": removing its "
                      << tier->name() << " tier entry failed: " << removed;
    }
  }
}

Status SpillTiers::Erase(SeqId seq) {
  Status first_error;
  for (auto& tier : tiers_) {
    Status removed = tier->Remove(seq);
    if (first_error.ok()) first_error = removed;
  }
  return first_error;
}

std::vector<TierStats> SpillTiers::Stats() const {
  std::vector<TierStats> stats;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    const SpillTier& tier = *tiers_[t];
    const TierCounters& c = counters_[t];
    stats.push_back(TierStats{std::string(tier.name()), tier.budget_bytes(),
                              tier.used_bytes(), tier.Entries().size(),
                              c.num_spills, c.spilled_bytes, c.num_bring_backs,
                              c.num_demotions, c.num_drops, c.dropped_bytes});
  }
  return stats;
}

}  // namespace kvault
