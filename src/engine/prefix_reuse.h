// PrefixReuse: what a request admitted into a slot starts from, cheapest
// first: the prefix of the slot's own cache the prompt repeats
// (llama-server's cache_prompt); a longer prefix another slot holds in the
// pool, taken as shared pages (the prefix cache, SchedulerOptions::
// prefix_cache); then the pages the persistent prefix store holds beyond
// that (SlotKv::ExtendFromStore). The last prompt token is always left to
// evaluate: its logits start generation. Part of the scheduler; scheduler
// thread only.
#ifndef KVAULT_ENGINE_PREFIX_REUSE_H_
#define KVAULT_ENGINE_PREFIX_REUSE_H_

#include <cstddef>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler_ports.h"
#include "engine/scheduler_state.h"
#include "engine/slot.h"

namespace kvault {

class PrefixReuse {
 public:
  // Neither owned. `prefix_cache` false: only the slot's own cache.
  PrefixReuse(bool prefix_cache, SlotKv* kv, SchedulerState* state);

  // Makes `slot` hold the longest reusable prefix of params.prompt (its
  // cached tokens and KV agree); returns its length.
  size_t Reuse(Slot& slot, const CompletionParams& params);

 private:
  // Keeps the first `keep` tokens of `slot`'s own cache (bringing spilled
  // KV back; dropping all of it when keep is 0); returns what it kept.
  size_t KeepOwn(Slot& slot, size_t keep);
  // Makes `slot` share the longest prefix of `prompt`, in whole pages, that
  // another slot holds in the pool, when it beats `own` tokens (at most
  // prompt.size() - 1); returns the tokens shared, 0 when none was.
  size_t ShareFromOtherSlot(Slot& slot, const std::vector<TokenId>& prompt,
                            size_t own);

  bool prefix_cache_;
  SlotKv* kv_;
  SchedulerState* state_;
};

}  // namespace kvault

#endif  // KVAULT_ENGINE_PREFIX_REUSE_H_
