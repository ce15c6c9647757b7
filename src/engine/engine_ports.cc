#include "engine/engine_ports.h"

#include <limits>
#include <vector>

#include "core/log.h"

namespace kvault {

uint64_t VaultSlotKv::page_size() const { return cache_->pool().page_size(); }

uint64_t VaultSlotKv::num_free_pages() const {
  return cache_->pool().num_free_pages();
}

uint64_t VaultSlotKv::PagesHeld(SeqId seq) const {
  return cache_->table().Pages(seq).size();
}

uint64_t VaultSlotKv::PagesToGrow(SeqId seq, uint64_t num_cells) const {
  return cache_->table().PagesToGrow(seq, num_cells);
}

Status VaultSlotKv::MakeRoom(uint64_t num_pages) {
  return vault_->MakeRoom(num_pages);
}

uint64_t VaultSlotKv::ResidentLength(SeqId seq) const {
  return cache_->table().Length(seq);
}

bool VaultSlotKv::IsSpilled(SeqId seq) const { return vault_->IsSpilled(seq); }

StatusOr<Eviction> VaultSlotKv::Evict(SeqId seq) { return vault_->Evict(seq); }

Status VaultSlotKv::BringBack(SeqId seq) {
  return vault_->EnsureResident(seq).status();
}

Status VaultSlotKv::Truncate(SeqId seq, Pos keep) {
  return cache_->RemoveRange(seq, keep, std::numeric_limits<Pos>::max());
}

Status VaultSlotKv::SharePrefix(SeqId dst, SeqId src, uint64_t num_cells) {
  if (!cache_->table().Contains(src)) {
    return NotFoundError("sharing a prefix of " + SeqLabel(src) +
                         ": not resident");
  }
  KV_RETURN_IF_ERROR(vault_->Erase(dst));
  return cache_->CopySequence(src, dst, num_cells);
}

Status VaultSlotKv::Erase(SeqId seq) { return vault_->Erase(seq); }

void VaultSlotKv::PublishPrefix(SeqId seq) {
  if (prefix_store_ == nullptr) return;
  if (Status s = prefix_store_->Publish(*cache_, seq); !s.ok()) {
    KV_LOG(WARNING) << "publishing " << SeqLabel(seq) << ": " << s;
  }
}

void VaultSlotKv::NotePrefill(uint64_t num_tokens, double seconds) {
  if (prefix_store_ != nullptr) prefix_store_->NotePrefill(num_tokens, seconds);
}

uint64_t VaultSlotKv::ExtendFromStore(SeqId seq,
                                      std::span<const TokenId> prompt,
                                      uint64_t keep) {
  if (prefix_store_ == nullptr || prompt.size() < 2) return keep;
  std::vector<TokenPos> wanted(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) {
    wanted[i] = {prompt[i], static_cast<Pos>(i)};
  }
  const uint32_t ps = cache_->pool().page_size();
  const uint64_t aligned = keep / ps * ps;
  // A stored tail (the filled part of a page) is worth asking for only
  // where the slot holds none of that page itself.
  if (!prefix_store_->HasPageAt(wanted, aligned, ps) &&
      !(keep == aligned && prefix_store_->HasTailAt(wanted, aligned, ps))) {
    return keep;
  }
  // The store continues the prompt from `aligned` on: drop the partial
  // page after it (at most ps - 1 cells) so whole pages can follow.
  Status trimmed = aligned == 0
                       ? vault_->Erase(seq)
                       : cache_->RemoveRange(seq, static_cast<Pos>(aligned),
                                             std::numeric_limits<Pos>::max());
  if (!trimmed.ok()) {
    KV_LOG(WARNING) << "prefix store: " << trimmed;
    return keep;
  }
  return prefix_store_->Extend(cache_, seq, wanted, aligned,
                               prompt.size() - 1);
}

void VaultSlotKv::SetActive(SeqId seq, bool active) {
  vault_->SetActive(seq, active);
}

void VaultSlotKv::Touch(SeqId seq) { vault_->Touch(seq); }

StatusOr<std::vector<float>> ModelForwardPass::Decode(
    std::span<const BatchToken> batch) {
  return context_->Decode(batch);
}

Status ModelForwardPass::DiscardRange(SeqId seq, Pos p0, Pos p1) {
  return context_->DiscardRange(seq, p0, p1);
}

size_t ModelForwardPass::n_vocab() const { return n_vocab_; }

}  // namespace kvault
