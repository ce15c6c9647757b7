// Saving a sequence's KV to a state file and restoring it, transactionally
// (format: docs/state_file_format.md). Save streams from the cache's pages
// through a bounded buffer; restore validates the header before reserving
// room, streams the chunks into reserved cells under a scratch sequence, and
// only then replaces the target, so a failure leaves the cache as it was.
#ifndef KVAULT_KV_STATE_FILE_H_
#define KVAULT_KV_STATE_FILE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/kv_types.h"
#include "kv/model_fingerprint.h"
#include "kv/state_format.h"

namespace kvault {

// Sequence ids from kFirstScratchSeq up are reserved for restores in
// flight: a restore reserves its cells under one until it commits. Callers
// must not use them for their own sequences; the vault never evicts them.
inline constexpr SeqId kFirstScratchSeq{0xFFFFFF00u};
// The scratch id RestoreSequence uses. Concurrent restores (RestoreJob) take
// other ids in [kFirstScratchSeq, kPrefixLoadSeq), one per job.
inline constexpr SeqId kRestoreScratchSeq{0xFFFFFFFFu};

// The scratch id the prefix store loads a page record under before the page
// joins its sequence (prefix_store.h). Restore jobs take ids below it.
inline constexpr SeqId kPrefixLoadSeq{0xFFFFFFFEu};
// Returns true when `seq` is a restore scratch id (>= kFirstScratchSeq).
inline constexpr bool IsScratchSeq(SeqId seq) {
  return seq.value() >= kFirstScratchSeq.value();
}
// Returns the name of `seq` in messages: "seq#N", or "scratch#K" for a
// restore scratch id (raw scratch ids read as garbage in a log line).
inline std::string SeqLabel(SeqId seq) {
  if (IsScratchSeq(seq)) {
    return "scratch#" + std::to_string(seq.value() - kFirstScratchSeq.value());
  }
  return "seq#" + std::to_string(seq.value());
}

struct SaveOptions {
  // Chunk size the writer aims for (see ChooseTokensPerChunk).
  uint64_t target_chunk_bytes = uint64_t{1} << 20;
  // When false, SaveSequenceToFile skips both fsyncs (page-cache speed; the
  // rename is still atomic but not durable across a crash).
  bool sync = true;
  // Written into the header's producer field (truncated to 32 bytes).
  std::string producer = "kvault 0.1.0";
  // Files written by SaveSequenceToFile / WriteSnapshotToFile start with
  // llama.cpp's token header (slot_file.h): what named slot saves get.
  bool llama_token_header = false;
};

struct SaveResult {
  uint64_t num_tokens = 0;
  uint64_t bytes_written = 0;
  double elapsed_ms = 0;
};

struct RestoreOptions {
  // Called when the cache has no room for `num_tokens` more cells (the
  // target's current cells are kept until the restore commits). It should
  // make room (e.g. evict idle sequences) and return OK, or return the error
  // the restore reports. Called at most once per restore. Null: no eviction.
  std::function<Status(uint64_t num_tokens)> make_room;
  // When there is still no room beside the target's current cells but the
  // target's own pages would hold the file, restore into them anyway: the
  // whole payload is read and verified into a host buffer (at most the
  // restored sequence's K/V) before the target's old cells are released,
  // so a bad file still leaves the target as it was.
  bool reuse_target_pages = false;
  // Threads that read and verify the chunks (the loading thread included;
  // at most one per chunk). More than one lets a restore outrun a single
  // core's copy-and-hash speed where memory is fast (docs/benchmarks.md,
  // state-io).
  uint32_t num_threads = 1;
};

struct RestoreResult {
  uint64_t num_tokens = 0;
  uint64_t bytes_read = 0;
  double elapsed_ms = 0;
  // True when it went through the host buffer into the target's own pages
  // (RestoreOptions::reuse_target_pages).
  bool reused_target_pages = false;
};

// Streams `seq`'s state to `out` (appended; neither synced nor closed) and
// returns the bytes written. NotFound for an unknown seq; FailedPrecondition
// when the cache keeps no K/V data (no layout).
StatusOr<uint64_t> WriteSequenceState(const KvCache& cache, SeqId seq,
                                      const ModelFingerprint& fingerprint,
                                      const SaveOptions& options,
                                      WritableFile* out);

// Saves `seq` to `path` durably: writes "<path>.tmp-<unique>" in the same
// directory, syncs, closes, renames over `path`, syncs the directory. On any
// error the temporary file is removed and a previous file at `path` is
// untouched.
StatusOr<SaveResult> SaveSequenceToFile(Env* env, const KvCache& cache,
                                        SeqId seq,
                                        const ModelFingerprint& fingerprint,
                                        const std::string& path,
                                        const SaveOptions& options = {});

// Runs checks 1-7 of the format document (everything that needs no cache):
// size, magic, header checksum, version, fields, length, trailer.
StatusOr<StateHeader> ReadStateHeader(const RandomAccessFile& file);

// Restores the state in `file` into `target` of `cache`, replacing its old
// contents on success. On any failure (mismatch, corruption, I/O error, no
// room) the cache is unchanged: table, pool and every used cell's bytes.
// ResourceExhausted names the cells needed and the room available.
StatusOr<RestoreResult> RestoreSequence(const RandomAccessFile& file,
                                        const ModelFingerprint& fingerprint,
                                        SeqId target, KvCache* cache,
                                        const RestoreOptions& options = {});

// Opens `path` with `env` and restores it as RestoreSequence does; errors
// are prefixed with the path.
StatusOr<RestoreResult> RestoreSequenceFromFile(
    Env* env, const std::string& path, const ModelFingerprint& fingerprint,
    SeqId target, KvCache* cache, const RestoreOptions& options = {});

// --- Internal: shared by the writer and the reader ----------------------
namespace state_internal {

// A run of consecutive pool cells [first, first + count).
struct CellRun {
  uint64_t first = 0;
  uint64_t count = 0;
};

// Replaces *runs with the maximal runs of consecutive pool cells that hold
// logical cells [begin, end) of a sequence owning `pages` (page_size cells
// each), in logical order. Precondition: end <= pages.size() * page_size.
void CollectCellRuns(std::span<const PageId> pages, uint32_t page_size,
                     uint64_t begin, uint64_t end, std::vector<CellRun>* runs);

// What checks 1-7 establish, plus the header checksum the summary needs.
struct ValidatedFile {
  StateHeader header;
  StateTrailer trailer;
  uint64_t header_checksum = 0;
};

// Reads exactly out.size() bytes at `offset` of `file`: an I/O error keeps
// its code and gains the offset; a short read is Corruption/truncated.
Status ReadExact(const RandomAccessFile& file, uint64_t offset,
                 std::span<std::byte> out, std::string_view what);
// Runs checks 1-7 (size, header, length, trailer).
StatusOr<ValidatedFile> ReadHeaderAndTrailer(const RandomAccessFile& file);
// Reads the token table into *tokens and verifies its checksum (check 11),
// returned in *checksum.
Status ReadTokenTable(const RandomAccessFile& file, const StateHeader& h,
                      std::vector<TokenPos>* tokens, uint64_t* checksum);

}  // namespace state_internal

}  // namespace kvault

#endif  // KVAULT_KV_STATE_FILE_H_
