// EngineSnapshot: what readers of the engine (GET /slots, /metrics, /kv)
// see. The scheduler thread rebuilds it from the scheduler, the vault and
// the cache after every step and publishes it under the engine's lock;
// readers copy the published one and never touch the scheduler's state.
#ifndef KVAULT_ENGINE_ENGINE_SNAPSHOT_H_
#define KVAULT_ENGINE_ENGINE_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "kv/kv_cache.h"
#include "kv/kv_vault.h"
#include "kv/prefix_store.h"

namespace kvault {

struct EngineSnapshot {
  std::vector<SlotInfo> slots;
  EngineMetrics metrics;  // pool and vault included
  KvMap map;
};

// Returns the snapshot of `scheduler`'s slots and counters, `vault`'s,
// `cache`'s and `prefix_store`'s (may be null) statistics and the page map;
// `ctx_per_slot` is each slot's context as /slots reports it. Scheduler
// thread only.
EngineSnapshot BuildEngineSnapshot(const Scheduler& scheduler,
                                   const KvVault& vault, const KvCache& cache,
                                   const PrefixStore* prefix_store,
                                   uint32_t ctx_per_slot);

// Returns the page -> slot map of `cache` (a restore in flight shows as its
// target slot's pages). Scheduler thread only.
KvMap BuildKvMap(const Scheduler& scheduler, const KvCache& cache);

}  // namespace kvault

#endif  // KVAULT_ENGINE_ENGINE_SNAPSHOT_H_
