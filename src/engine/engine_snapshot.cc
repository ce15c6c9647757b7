#include "engine/engine_snapshot.h"

#include <map>
#include <optional>
#include <utility>

namespace kvault {
namespace {

SlotInfo SlotInfoOf(const Slot& slot, const KvVault& vault,
                    uint32_t ctx_per_slot) {
  SlotInfo info;
  info.id = slot.id;
  info.n_ctx = ctx_per_slot;
  info.is_processing = slot.busy();
  info.spilled = vault.IsSpilled(slot.seq);
  info.state = SlotDisplayState(slot, info.spilled);
  info.n_cached = slot.cached.size();
  info.n_kv_dropped = slot.cached.empty() ? slot.kv_dropped : 0;
  if (slot.request != nullptr) info.id_task = slot.request->task_id;
  info.params = slot.last_params;
  info.n_predict = slot.last_n_predict;
  info.n_decoded = slot.request != nullptr ? slot.request->result.tokens.size()
                                           : slot.last_n_decoded;
  return info;
}

}  // namespace

EngineSnapshot BuildEngineSnapshot(const Scheduler& scheduler,
                                   const KvVault& vault, const KvCache& cache,
                                   const PrefixStore* prefix_store,
                                   uint32_t ctx_per_slot) {
  EngineSnapshot s;
  const SchedulerState& state = scheduler.state();
  uint64_t processing = 0;
  for (const Slot& slot : state.slots) {
    s.slots.push_back(SlotInfoOf(slot, vault, ctx_per_slot));
    if (slot.request != nullptr) ++processing;
  }
  s.metrics = state.counters;
  s.metrics.requests_processing = processing;
  s.metrics.requests_deferred = scheduler.NumQueuedCompletions();
  s.map = BuildKvMap(scheduler, cache);
  s.metrics.pool = s.map.stats;
  s.metrics.vault = vault.Stats();
  if (prefix_store != nullptr) s.metrics.prefix_store = prefix_store->Stats();
  return s;
}

KvMap BuildKvMap(const Scheduler& scheduler, const KvCache& cache) {
  const std::map<SeqId, uint32_t> scratch_slot =
      scheduler.jobs().ScratchOwners();
  const size_t num_slots = scheduler.state().slots.size();
  KvMap map;
  map.stats = cache.Stats();
  map.stats.sequences.clear();
  map.page_size = cache.pool().page_size();
  map.page_slot.assign(cache.pool().num_pages(), std::nullopt);
  map.page_shared.assign(cache.pool().num_pages(), false);
  for (SeqId seq : cache.table().SequenceIds()) {
    uint32_t slot = seq.value();
    if (slot >= num_slots) {
      // A restore in flight shows as its target slot's.
      auto it = scratch_slot.find(seq);
      if (it == scratch_slot.end()) continue;
      slot = it->second;
    }
    for (PageId page : cache.table().Pages(seq)) {
      std::optional<uint32_t>& owner = map.page_slot[page.value()];
      if (owner && *owner != slot) map.page_shared[page.value()] = true;
      if (!owner || *owner > slot) owner = slot;
    }
  }
  return map;
}

}  // namespace kvault
