// What a request starts from (prefix_reuse.h).
#include "engine/prefix_reuse.h"

#include <algorithm>

#include "core/log.h"

namespace kvault {

PrefixReuse::PrefixReuse(bool prefix_cache, SlotKv* kv, SchedulerState* state)
    : prefix_cache_(prefix_cache), kv_(kv), state_(state) {}

size_t PrefixReuse::Reuse(Slot& slot, const CompletionParams& params) {
  const std::vector<TokenId>& prompt = params.prompt;
  size_t keep = params.cache_prompt ? CommonPrefix(slot.cached, prompt) : 0;
  // The last prompt token is always evaluated: its logits start generation.
  if (keep == prompt.size()) --keep;
  const bool prefix_cache = params.cache_prompt && prefix_cache_;
  const size_t shared =
      prefix_cache ? ShareFromOtherSlot(slot, prompt, keep) : 0;
  keep = shared > 0 ? shared : KeepOwn(slot, keep);
  if (prefix_cache) {
    const size_t stored = kv_->ExtendFromStore(slot.seq, prompt, keep);
    if (stored != keep) {
      slot.cached.assign(prompt.begin(), prompt.begin() + stored);
      if (stored > keep) {
        state_->counters.prompt_tokens_from_store_total += stored - keep;
      }
      keep = stored;
    }
  }
  return keep;
}

size_t PrefixReuse::KeepOwn(Slot& slot, size_t keep) {
  if (keep > 0 && kv_->IsSpilled(slot.seq)) {
    if (Status back = kv_->BringBack(slot.seq); !back.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id
                      << ": cannot bring back its spilled KV, recomputing "
                      << keep << " prompt tokens: " << back;
      keep = 0;
    } else {
      // llama-server's wording for the same event (scripts grep for it).
      KV_LOG(INFO) << "slot " << slot.id
                   << ": updating prompt cache: " << slot.cached.size()
                   << " tokens of KV brought back from the spill tiers";
    }
  }
  if (keep > 0 && keep < slot.cached.size()) {
    Status trimmed = kv_->Truncate(slot.seq, static_cast<Pos>(keep));
    if (!trimmed.ok()) {
      KV_LOG(WARNING) << "slot " << slot.id << ": trimming to " << keep
                      << " tokens failed, recomputing: " << trimmed;
      keep = 0;
    } else {
      slot.cached.resize(keep);
    }
  }
  if (keep == 0) {
    Status erased = kv_->Erase(slot.seq);
    if (!erased.ok()) KV_LOG(WARNING) << "slot " << slot.id << ": " << erased;
    slot.cached.clear();
  }
  return keep;
}

size_t PrefixReuse::ShareFromOtherSlot(Slot& slot,
                                       const std::vector<TokenId>& prompt,
                                       size_t own) {
  // Whole pages only (as vLLM's prefix caching): a shared page is never
  // written again, so neither side ever copies it.
  const size_t page_size = kv_->page_size();
  const Slot* donor = nullptr;
  size_t best = own;
  for (const Slot& other : state_->slots) {
    // Only KV that is resident whole and not under a slot action.
    if (&other == &slot || other.state == SlotState::kIo ||
        kv_->ResidentLength(other.seq) != other.cached.size()) {
      continue;
    }
    const size_t n = std::min(CommonPrefix(other.cached, prompt),
                              prompt.size() - 1) /
                     page_size * page_size;
    if (n > best) {
      best = n;
      donor = &other;
    }
  }
  if (donor == nullptr) return 0;
  if (Status shared = kv_->SharePrefix(slot.seq, donor->seq, best);
      !shared.ok()) {
    KV_LOG(WARNING) << "slot " << slot.id << ": cannot share " << best
                    << " prompt tokens of slot " << donor->id << ": "
                    << shared;
    return 0;
  }
  slot.cached.assign(prompt.begin(), prompt.begin() + best);
  state_->counters.prompt_tokens_shared_total += best;
  return best;
}

}  // namespace kvault
