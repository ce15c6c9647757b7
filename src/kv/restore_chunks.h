// Internal to RestoreJob: reading and verifying a state file's K/V chunks
// (checks 12-13 of docs/state_file_format.md) and copying verified payloads
// into a sequence's cells. Shared by the two ways a restore loads:
//
//   reserved  Prepare reserved the cells under a scratch sequence, so each
//             chunk is read straight into them (they are not the target's
//             until Commit, which needs every chunk verified).
//   buffered  there was no room beside the target's old KV, but its own pages
//             would hold the file: Load reads the whole payload into a host
//             buffer and verifies every chunk, and only Commit releases the
//             target's pages and copies the buffer in. A bad file therefore
//             fails before anything of the target moved.
#ifndef KVAULT_KV_RESTORE_CHUNKS_H_
#define KVAULT_KV_RESTORE_CHUNKS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"

namespace kvault::state_internal {

// Where a chunk's payload goes: its bytes, in file order, fill these spans
// one after another (their sizes add up to the payload's).
using ChunkTargets = std::vector<std::span<std::byte>>;
// Fills `out` (emptied by the caller) with the targets of the chunk of
// tokens [t0, t0 + t). Called from every loading thread; must be
// thread-safe.
using ChunkTargetsFn =
    std::function<void(uint64_t t0, uint64_t t, ChunkTargets* out)>;

// The bytes a loading thread reads at once: small enough to stay in its
// L2 cache while they are copied and hashed, large enough that a pread
// costs little per byte.
inline constexpr uint64_t kChunkReadBytes = uint64_t{256} << 10;

// Reads every chunk of `file` straight through a small per-thread buffer
// into its targets, hashing each piece as it is copied (check 12), then
// verifies the summary (check 13). `num_threads` threads (the caller's
// included, at most one per chunk) take chunks in file order. Corruption
// (reason checksum_mismatch) or IOError as RestoreSequence, for the first
// bad chunk in file order; chunks after it are not started once it is
// known. The targets of a chunk hold unverified bytes until the call
// returns OK: callers use them only then.
Status LoadChunks(const RandomAccessFile& file, const ValidatedFile& v,
                  uint64_t token_checksum, const ChunkTargetsFn& targets_for,
                  uint32_t num_threads);

// Appends to `out` where a chunk of logical cells [t0, t0 + t) of a
// sequence owning `pages` goes in `storage`, in the file's order
// ([layer][K runs, V runs]).
void CellTargets(std::span<const PageId> pages, uint32_t page_size, uint64_t t0,
                 uint64_t t, KvStorage* storage, ChunkTargets* out);

// Copies a verified chunk payload (the file's order) of logical cells
// [t0, t0 + t) into a sequence owning `pages`.
void ScatterChunk(std::span<const PageId> pages, uint32_t page_size,
                  uint64_t t0, uint64_t t, const std::byte* payload,
                  KvStorage* storage);

// Returns true when a new sequence of `num_cells` cells would fit in the
// free pages plus the pages `target` alone holds (what removing it frees),
// under the cache's placement: a single run of pages when `need_run`.
bool FitsInTargetPages(const KvCache& cache, SeqId target, uint64_t num_cells,
                       bool need_run);

}  // namespace kvault::state_internal

#endif  // KVAULT_KV_RESTORE_CHUNKS_H_
