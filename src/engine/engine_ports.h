// The scheduler's ports over the real thing: SlotKv over the KvVault and
// its KvCache, ForwardPass over the InferenceContext.
#ifndef KVAULT_ENGINE_ENGINE_PORTS_H_
#define KVAULT_ENGINE_ENGINE_PORTS_H_

#include "engine/scheduler_ports.h"
#include "kv/kv_cache.h"
#include "kv/kv_vault.h"
#include "kv/prefix_store.h"
#include "model/inference.h"

namespace kvault {

class VaultSlotKv final : public SlotKv {
 public:
  // None owned; `vault` wraps `cache`; `prefix_store` may be null.
  VaultSlotKv(KvVault* vault, KvCache* cache, PrefixStore* prefix_store)
      : vault_(vault), cache_(cache), prefix_store_(prefix_store) {}

  uint64_t page_size() const override;
  uint64_t num_free_pages() const override;
  uint64_t PagesHeld(SeqId seq) const override;
  uint64_t PagesToGrow(SeqId seq, uint64_t num_cells) const override;
  Status MakeRoom(uint64_t num_pages) override;
  uint64_t ResidentLength(SeqId seq) const override;
  bool IsSpilled(SeqId seq) const override;
  StatusOr<Eviction> Evict(SeqId seq) override;
  Status BringBack(SeqId seq) override;
  Status Truncate(SeqId seq, Pos keep) override;
  Status SharePrefix(SeqId dst, SeqId src, uint64_t num_cells) override;
  Status Erase(SeqId seq) override;
  void PublishPrefix(SeqId seq) override;
  void NotePrefill(uint64_t num_tokens, double seconds) override;
  uint64_t ExtendFromStore(SeqId seq, std::span<const TokenId> prompt,
                           uint64_t keep) override;
  void SetActive(SeqId seq, bool active) override;
  void Touch(SeqId seq) override;

 private:
  KvVault* vault_;
  KvCache* cache_;
  PrefixStore* prefix_store_;
};

class ModelForwardPass final : public ForwardPass {
 public:
  // Not owned; `n_vocab`: the model's.
  ModelForwardPass(InferenceContext* context, size_t n_vocab)
      : context_(context), n_vocab_(n_vocab) {}

  StatusOr<std::vector<float>> Decode(
      std::span<const BatchToken> batch) override;
  Status DiscardRange(SeqId seq, Pos p0, Pos p1) override;
  size_t n_vocab() const override;

 private:
  InferenceContext* context_;
  size_t n_vocab_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_ENGINE_PORTS_H_
