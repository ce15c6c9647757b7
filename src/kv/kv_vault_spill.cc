// KvVault: evicting sequences into the spill tiers (where each goes, and
// what is demoted or dropped for it, is SpillTiers' business), one at a time
// or as many as the room ladder needs (which ones is RoomPlanner's
// business), and saving a sequence wherever it lives.
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "kv/kv_vault.h"
#include "kv/room_planner.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

// Returns the size of `seq`'s state file as WriteSequenceState writes it
// from `cache` with `save`.
uint64_t StateBytes(const KvCache& cache, const SaveOptions& save, SeqId seq) {
  StateHeader header;
  header.layout = cache.storage()->layout();
  header.num_tokens = cache.table().Length(seq);
  header.tokens_per_chunk =
      ChooseTokensPerChunk(header.layout, save.target_chunk_bytes);
  return header.file_bytes();
}

}  // namespace

StatusOr<Eviction> KvVault::Evict(SeqId seq) {
  if (IsScratchSeq(seq) || !cache_->table().Contains(seq)) {
    return NotFoundError("evict: " + SeqLabel(seq) + " is not resident");
  }
  if (IsActive(seq)) {
    return FailedPreconditionError("evict: " + SeqLabel(seq) + " is active");
  }
  KV_ASSIGN_OR_RETURN(
      StoredEntry stored,
      spill_tiers_.Store(seq, MetaOf(seq).last_use,
                         StateBytes(*cache_, save_options_, seq),
                         [this, seq](WritableFile* out) {
                           return WriteSequenceState(*cache_, seq, fingerprint_,
                                                     save_options_, out);
                         }));
  // Committed: the tier holds a validated copy, so the pages may go.
  cache_->RemoveSequence(seq);
  ++evictions_;
  KV_LOG(INFO) << "evicted " << SeqLabel(seq) << " (" << stored.info.num_tokens
               << " tokens, " << stored.info.num_bytes << " bytes) to the "
               << stored.tier << " tier";
  return Eviction{seq, stored.tier, stored.info.num_tokens,
                  stored.info.num_bytes};
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

// The room ladder (room_planner.h): the planner decides, the vault evicts.
Status KvVault::MakeRoomFor(const RoomRequest& request,
                            std::vector<Eviction>* evicted) {
  const RoomPlanner planner(*cache_, *policy_, [this](SeqId seq) {
    const SeqMeta meta = MetaOf(seq);
    return RoomSeqFacts{meta.last_use, meta.active,
                        StateBytes(*cache_, save_options_, seq) <=
                            spill_tiers_.MaxTierBudget()};
  });
  if (planner.CanPlace(request.num_pages)) return Status::Ok();
  // Check first: nothing moves unless evicting would be enough.
  KV_ASSIGN_OR_RETURN(const RoomPlan plan, planner.Plan(request));
  if (plan.target_first) {
    StatusOr<Eviction> spilled = EvictForRoom(*request.own, request);
    if (!spilled.ok()) {
      return plan.short_of_room.WithContext(
          "spilling the target's own KV failed too (" +
          std::string(spilled.status().message()) + ")");
    }
    evicted->push_back(*spilled);
  }
  Status first_error;
  for (SeqId seq : plan.order) {
    if (planner.CanPlace(request.num_pages)) return Status::Ok();
    StatusOr<Eviction> eviction = EvictForRoom(seq, request);
    if (eviction.ok()) {
      evicted->push_back(*eviction);
      continue;
    }
    // The sequence stays resident; later candidates may still free enough.
    KV_LOG(WARNING) << request.need << ": could not evict " << SeqLabel(seq)
                    << ": " << eviction.status();
    if (first_error.ok()) first_error = eviction.status();
  }
  if (planner.CanPlace(request.num_pages)) return Status::Ok();
  if (!first_error.ok()) {
    return first_error.WithContext(request.need + ": evicting");
  }
  return planner.NoRoomError(request, evicted->size());
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

StatusOr<SaveResult> KvVault::Save(SeqId seq, const std::string& path) {
  if (IsScratchSeq(seq)) {
    // Its cells may be half loaded by a restore in flight.
    return NotFoundError("save " + SeqLabel(seq) + " to " + path +
                         ": a restore scratch sequence");
  }
  if (cache_->table().Contains(seq)) {
    return SaveSequenceToFile(env_, *cache_, seq, fingerprint_, path,
                              slot_file_options_);
  }
  if (!spill_tiers_.TierOf(seq)) {
    return NotFoundError("save " + SeqLabel(seq) + " to " + path +
                         ": neither resident nor spilled");
  }
  return spill_tiers_.CopyTo(seq, env_, path, slot_file_options_.sync,
                             /*llama_token_header=*/true);
}

StatusOr<std::unique_ptr<RandomAccessFile>> KvVault::OpenSpilledForSave(
    SeqId seq) {
  return spill_tiers_.OpenEntry(seq);
}

}  // namespace kvault
