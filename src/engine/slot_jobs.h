// The engine's slot actions as SlotJobs: save, restore, erase, defrag.
// Each holds its slot's id, never a reference into the scheduler, and
// answers its caller through its Reply.
//
// A save snapshots the slot on the scheduler thread and writes on an I/O
// thread (a spilled slot's save copies its tier entry inline). A restore
// opens the file on an I/O thread (a hung filesystem blocks open() too),
// validates it and reserves cells under a scratch sequence on the
// scheduler thread, loads on an I/O thread while other slots decode, and
// commits on the scheduler thread; the slot's old KV stays until then.
#ifndef KVAULT_ENGINE_SLOT_JOBS_H_
#define KVAULT_ENGINE_SLOT_JOBS_H_

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/slot_job.h"
#include "kv/kv_cache.h"
#include "kv/kv_vault.h"
#include "kv/prefix_store.h"
#include "kv/slot_file_mirror.h"

namespace kvault {

// What every job of the engine works on.
struct JobTarget {
  KvVault* vault = nullptr;
  KvCache* cache = nullptr;
  SlotFileMirror* mirror = nullptr;  // --kv-store: named saves mirrored
  const PrefixStore* prefix_store = nullptr;  // null: none
};

std::unique_ptr<SlotJob> NewSaveJob(JobTarget target, uint32_t slot,
                                    std::string path,
                                    Reply<SlotSaveResult> reply);
std::unique_ptr<SlotJob> NewRestoreJob(JobTarget target, uint32_t slot,
                                       std::string path,
                                       Reply<SlotRestoreResult> reply);
std::unique_ptr<SlotJob> NewEraseJob(JobTarget target, uint32_t slot,
                                     Reply<uint64_t> reply);
std::unique_ptr<SlotJob> NewDefragJob(JobTarget target,
                                      Reply<DefragReport> reply);
std::unique_ptr<SlotJob> NewLookupJob(JobTarget target,
                                      std::vector<TokenId> tokens,
                                      Reply<PrefixLookup> reply);

// Sets slot.cached from the cache's sequence table.
void RefreshCached(const KvCache& cache, Slot& slot);

}  // namespace kvault

#endif  // KVAULT_ENGINE_SLOT_JOBS_H_
