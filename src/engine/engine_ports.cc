#include "engine/engine_ports.h"

#include <limits>

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
    return NotFoundError("sharing a prefix of " + KvVault::SeqLabel(src) +
                         ": not resident");
  }
  KV_RETURN_IF_ERROR(vault_->Erase(dst));
  return cache_->CopySequence(src, dst, num_cells);
}

Status VaultSlotKv::Erase(SeqId seq) { return vault_->Erase(seq); }

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
