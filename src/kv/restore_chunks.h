// Internal to RestoreJob: reading and verifying a state file's K/V chunks
// (checks 12-13 of docs/state_file_format.md) and copying verified payloads
// into a sequence's cells. Shared by the two ways a restore loads:
//
//   reserved  Prepare reserved the cells under a scratch sequence, so each
//             verified chunk is scattered into them at once.
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

#include "core/env.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "kv/state_file.h"

namespace kvault::state_internal {

// Returns where chunk `c` (first token `t0`, `t` tokens) is read: room for
// its payload plus the 8-byte checksum.
using ChunkBufferFn =
    std::function<std::span<std::byte>(uint64_t c, uint64_t t0, uint64_t t)>;
// Takes chunk `c`'s verified payload (tokens [t0, t0 + t)).
using ChunkDoneFn =
    std::function<void(uint64_t t0, uint64_t t, const std::byte* payload)>;

// Reads every chunk of `file` into `buffer_for`'s span, verifies its
// checksum (check 12) and hands it to `done`, then verifies the summary
// (check 13). Corruption (reason checksum_mismatch) or IOError as
// RestoreSequence; chunks after a bad one are not read.
Status VerifyChunks(const RandomAccessFile& file, const ValidatedFile& v,
                    uint64_t token_checksum, const ChunkBufferFn& buffer_for,
                    const ChunkDoneFn& done);

// Copies a verified chunk payload ([layer][K runs, V runs], the file's
// order) of logical cells [t0, t0 + t) into a sequence owning `pages`.
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
