// The scheduler's two ports: the forward pass and the KV vault, as
// interfaces, so that the scheduler's policy runs in tests with a fake of
// each (no model, no threads) and in the engine with the real ones
// (engine_ports.h).
#ifndef KVAULT_ENGINE_SCHEDULER_PORTS_H_
#define KVAULT_ENGINE_SCHEDULER_PORTS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_types.h"
#include "kv/kv_vault.h"
#include "model/inference.h"

namespace kvault {

// One forward pass over a batch mixing sequences.
class ForwardPass {
 public:
  virtual ~ForwardPass() = default;
  // Appends the batch's cells to the cache and returns the logits rows of
  // the tokens that want them, in batch order (n_vocab() floats each).
  // ResourceExhausted when the cache cannot place the cells.
  virtual StatusOr<std::vector<float>> Decode(
      std::span<const BatchToken> batch) = 0;
  // Removes `seq`'s cells [p0, p1) and shifts the later ones down by
  // p1 - p0 positions (context shift).
  virtual Status DiscardRange(SeqId seq, Pos p0, Pos p1) = 0;
  // Returns the width of a logits row.
  virtual size_t n_vocab() const = 0;
};

// What the scheduler asks of the KV side: pages, residency and spilling of
// one sequence per slot. Sequences marked active are never evicted.
class SlotKv {
 public:
  virtual ~SlotKv() = default;
  // Returns the cells per page.
  virtual uint64_t page_size() const = 0;
  // Returns the pool's free pages.
  virtual uint64_t num_free_pages() const = 0;
  // Returns the pages `seq` holds in the pool.
  virtual uint64_t PagesHeld(SeqId seq) const = 0;
  // Returns the pages `seq` must newly take to grow by `num_cells`.
  virtual uint64_t PagesToGrow(SeqId seq, uint64_t num_cells) const = 0;
  // Evicts idle sequences until `num_pages` pages are free;
  // ResourceExhausted, evicting nothing, when that cannot be done.
  virtual Status MakeRoom(uint64_t num_pages) = 0;
  // Returns the cells `seq` holds in the pool (0 when spilled).
  virtual uint64_t ResidentLength(SeqId seq) const = 0;
  // Returns true when `seq` is held by a spill tier, not the pool.
  virtual bool IsSpilled(SeqId seq) const = 0;
  // Spills the resident, idle `seq` (see KvVault::Evict).
  virtual StatusOr<Eviction> Evict(SeqId seq) = 0;
  // Brings a spilled `seq` back (OK when resident); ResourceExhausted when
  // there is no room yet, other errors when its copy is unusable.
  virtual Status BringBack(SeqId seq) = 0;
  // Drops `seq`'s cells from position `keep` on.
  virtual Status Truncate(SeqId seq, Pos keep) = 0;
  // Replaces `dst`'s KV (resident or spilled) with the first `num_cells`
  // cells of the resident `src`, sharing their pages (copy-on-write): no
  // data is copied. NotFound when `src` is not resident.
  virtual Status SharePrefix(SeqId dst, SeqId src, uint64_t num_cells) = 0;
  // Drops `seq` from the pool and every tier.
  virtual Status Erase(SeqId seq) = 0;
  // Offers `seq`'s full pages to the persistent prefix store (a no-op
  // without one); a failure is logged and counted there, never fatal.
  virtual void PublishPrefix(SeqId seq) = 0;
  // Tells the prefix store that a request evaluated `num_tokens` prompt
  // tokens in `seconds`: the recompute cost a fetch is weighed against.
  virtual void NotePrefill(uint64_t num_tokens, double seconds) = 0;
  // `seq` holds `prompt`'s first `keep` cells (resident). When the prefix
  // store holds the pages that continue them, makes `seq` hold the longest
  // stored prefix of `prompt` (at most prompt.size() - 1 cells); returns
  // the cells it holds afterwards (keep when the store had nothing; never
  // less than keep rounded down to a page).
  virtual uint64_t ExtendFromStore(SeqId seq, std::span<const TokenId> prompt,
                                   uint64_t keep) = 0;
  // Marks `seq` as used by a request or action (never evicted) or not.
  virtual void SetActive(SeqId seq, bool active) = 0;
  // Marks `seq` as used now (the eviction order).
  virtual void Touch(SeqId seq) = 0;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_SCHEDULER_PORTS_H_
