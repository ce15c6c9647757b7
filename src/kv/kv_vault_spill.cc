// KvVault: evicting sequences into the spill tiers (where each goes, and
// what is demoted or dropped for it, is SpillTiers' business), and saving a
// sequence wherever it lives.
#include <string>

#include "core/log.h"
#include "kv/kv_vault.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

std::string Name(SeqId seq) { return KvVault::SeqLabel(seq); }

}  // namespace

uint64_t KvVault::StateBytes(SeqId seq) const {
  StateHeader header;
  header.layout = cache_->storage()->layout();
  header.num_tokens = cache_->table().Length(seq);
  header.tokens_per_chunk =
      ChooseTokensPerChunk(header.layout, save_options_.target_chunk_bytes);
  return header.file_bytes();
}

StatusOr<Eviction> KvVault::Evict(SeqId seq) {
  if (IsScratchSeq(seq) || !cache_->table().Contains(seq)) {
    return NotFoundError("evict: " + Name(seq) + " is not resident");
  }
  if (IsActive(seq)) {
    return FailedPreconditionError("evict: " + Name(seq) + " is active");
  }
  KV_ASSIGN_OR_RETURN(
      StoredEntry stored,
      spill_tiers_.Store(seq, MetaOf(seq).last_use, StateBytes(seq),
                         [this, seq](WritableFile* out) {
                           return WriteSequenceState(*cache_, seq, fingerprint_,
                                                     save_options_, out);
                         }));
  // Committed: the tier holds a validated copy, so the pages may go.
  cache_->RemoveSequence(seq);
  ++evictions_;
  KV_LOG(INFO) << "evicted " << Name(seq) << " (" << stored.info.num_tokens
               << " tokens, " << stored.info.num_bytes << " bytes) to the "
               << stored.tier << " tier";
  return Eviction{seq, stored.tier, stored.info.num_tokens,
                  stored.info.num_bytes};
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
  if (!spill_tiers_.TierOf(seq)) {
    return NotFoundError("save " + Name(seq) + " to " + path +
                         ": neither resident nor spilled");
  }
  return spill_tiers_.CopyTo(seq, env_, path, save_options_.sync);
}

}  // namespace kvault
