// RestoreJob: the transactional restore of state_file.h split into Prepare
// (checks 1-11, reserve under a scratch sequence or plan to reuse the
// target's pages), Load (checks 12-13 and the scatter into the reserved
// cells or a host buffer, on any thread) and Commit/Abort.
#include "kv/restore_job.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kv/restore_chunks.h"

namespace kvault {
namespace {

using state_internal::ValidatedFile;

// Load, Commit and Abort move the phase on with compare-exchange so that an
// Abort racing a Load that has not started yet is safe (exactly one wins).
enum class RestorePhase : uint8_t {
  kPrepared,
  kLoading,
  kLoaded,
  kLoadFailed,
  kFinished,
};

std::string Name(SeqId seq) { return "seq#" + std::to_string(seq.value()); }

// Returns true when a scratch sequence other than `scratch` is in `table`.
bool OtherScratchExists(const SequenceTable& table, SeqId scratch) {
  const std::vector<SeqId> ids = table.SequenceIds();  // ascending
  for (auto it = ids.rbegin(); it != ids.rend() && IsScratchSeq(*it); ++it) {
    if (*it != scratch) return true;
  }
  return false;
}

// Appends `tokens` under `scratch`. A contiguous+defrag cache defragments
// when a placement fails; that would move the cells another restore's Load
// may be writing right now, so then the placement just fails.
StatusOr<std::vector<CellId>> AppendScratch(KvCache* cache, SeqId scratch,
                                            std::span<const TokenPos> tokens) {
  if (cache->MayMoveCellsOnAppend() &&
      !cache->table().CanAppend(scratch, tokens.size()) &&
      OtherScratchExists(cache->table(), scratch)) {
    return ResourceExhaustedError(
        "no free run of pages for " + Name(scratch) +
        ", and defragmenting would move the cells of a restore in flight");
  }
  return cache->Append(scratch, tokens);
}

// Where Prepare put the restore (restore_chunks.h).
enum class Placement : uint8_t {
  kReserved,     // cells reserved under the scratch sequence
  kTargetPages,  // into the target's own pages at Commit, via a host buffer
};

// Returns true when a new sequence of `num_cells` fits in the free pages
// plus the target's own. Under contiguous+defrag the Append at Commit may
// defragment, which must not move another restore's cells in flight: then
// it needs a run, as contiguous does.
bool TargetPagesFit(const KvCache& cache, SeqId target, SeqId scratch,
                    uint64_t num_cells) {
  const bool need_run = cache.kv_policy() == KvPolicy::kContiguous ||
                        (cache.MayMoveCellsOnAppend() &&
                         OtherScratchExists(cache.table(), scratch));
  return state_internal::FitsInTargetPages(cache, target, num_cells, need_run);
}

Status NoRoomError(const KvCache& cache, uint64_t num_cells, bool asked,
                   const Status& placement) {
  const PagePool& pool = cache.pool();
  const uint64_t pages = PagesForCells(num_cells, pool.page_size());
  return ResourceExhaustedError(
      "restore needs " + std::to_string(num_cells) + " cells (" +
      std::to_string(pages) + " pages of " + std::to_string(pool.page_size()) +
      "), the pool has " + std::to_string(pool.num_free_pages()) + " of " +
      std::to_string(pool.num_pages()) + " pages free" +
      (asked ? " after make_room" : "") + " (" +
      std::string(placement.message()) + ")");
}

// Reserves cells for `tokens` under `scratch`, asking options.make_room
// once when the pool is full; falls back to the target's own pages when
// options allow it and they suffice.
StatusOr<Placement> ReserveCells(KvCache* cache, SeqId target, SeqId scratch,
                                 std::span<const TokenPos> tokens,
                                 const RestoreOptions& options) {
  StatusOr<std::vector<CellId>> cells = AppendScratch(cache, scratch, tokens);
  bool asked = false;
  Status room;
  if (!cells.ok() && cells.status().IsResourceExhausted() &&
      options.make_room) {
    room = options.make_room(tokens.size());
    asked = true;
    if (room.ok()) cells = AppendScratch(cache, scratch, tokens);
  }
  if (cells.ok()) return Placement::kReserved;
  if (!cells.status().IsResourceExhausted()) return cells.status();
  if (options.reuse_target_pages &&
      TargetPagesFit(*cache, target, scratch, tokens.size())) {
    return Placement::kTargetPages;
  }
  if (!room.ok()) return room;
  return NoRoomError(*cache, tokens.size(), asked, cells.status());
}

// Checks what Prepare needs before it reads the file.
Status CheckPrepareArgs(const RandomAccessFile* file, const KvCache* cache,
                        SeqId target, SeqId scratch) {
  const std::string where = "restore into " + Name(target);
  if (file == nullptr || cache == nullptr) {
    return InvalidArgumentError(where + ": null file or cache");
  }
  if (cache->storage() == nullptr) {
    return FailedPreconditionError(where +
                                   ": the cache keeps no K/V data (no layout)");
  }
  // kPrefixLoadSeq is a holding place the prefix store restores a page
  // record into before the page joins its sequence; other scratch ids
  // belong to restores in flight.
  if (IsScratchSeq(target) && target != kPrefixLoadSeq) {
    return InvalidArgumentError("restore: " + Name(target) +
                                " is a reserved restore scratch sequence");
  }
  if (!IsScratchSeq(scratch)) {
    return InvalidArgumentError(where + ": " + Name(scratch) +
                                " is not a scratch id (from " +
                                Name(kFirstScratchSeq) + " up)");
  }
  return Status::Ok();
}

}  // namespace

struct RestoreJob::State {
  std::unique_ptr<RandomAccessFile> file;
  KvCache* cache = nullptr;
  KvStorage* storage = nullptr;
  SeqId scratch;
  ValidatedFile validated;
  uint64_t token_checksum = 0;
  Placement placement = Placement::kReserved;
  // kReserved: the scratch sequence's pages when Prepare reserved them,
  // what Load writes (it must not read the table, which the owner keeps
  // using).
  std::vector<PageId> pages;
  uint32_t page_size = 0;
  uint32_t num_threads = 1;  // RestoreOptions::num_threads
  // kTargetPages: the cells Commit appends, and the verified K/V payload
  // Load read (file order).
  std::vector<TokenPos> tokens;
  std::unique_ptr<std::byte[]> payload;
  std::chrono::steady_clock::time_point start;
  std::atomic<RestorePhase> phase{RestorePhase::kPrepared};
};

StatusOr<std::unique_ptr<RestoreJob>> RestoreJob::Prepare(
    std::unique_ptr<RandomAccessFile> file, const ModelFingerprint& fingerprint,
    KvCache* cache, SeqId target, SeqId scratch,
    const RestoreOptions& options) {
  auto state = std::make_unique<State>();
  state->start = std::chrono::steady_clock::now();
  KV_RETURN_IF_ERROR(CheckPrepareArgs(file.get(), cache, target, scratch));
  KV_ASSIGN_OR_RETURN(state->validated,
                      state_internal::ReadHeaderAndTrailer(*file));
  const StateHeader& h = state->validated.header;
  KV_RETURN_IF_ERROR(
      CheckCompatible(h, cache->storage()->layout(), fingerprint));
  if (cache->table().Contains(scratch)) {
    return FailedPreconditionError(
        "restore into " + Name(target) + ": the scratch sequence " +
        Name(scratch) +
        " exists (another restore in progress, or a caller uses its id)");
  }
  std::vector<TokenPos> tokens;
  KV_RETURN_IF_ERROR(state_internal::ReadTokenTable(*file, h, &tokens,
                                                    &state->token_checksum));
  StatusOr<Placement> placement =
      ReserveCells(cache, target, scratch, tokens, options);
  if (!placement.ok()) {
    return placement.status().WithContext("restore into " + Name(target));
  }
  state->placement = *placement;
  if (*placement == Placement::kReserved) {
    const std::span<const PageId> pages = cache->table().Pages(scratch);
    state->pages.assign(pages.begin(), pages.end());
  } else {
    state->tokens = std::move(tokens);
  }
  state->file = std::move(file);
  state->cache = cache;
  state->storage = cache->storage();
  state->scratch = scratch;
  state->page_size = cache->pool().page_size();
  state->num_threads = options.num_threads;
  return std::unique_ptr<RestoreJob>(new RestoreJob(std::move(state), target));
}

RestoreJob::RestoreJob(std::unique_ptr<State> state, SeqId target)
    : state_(std::move(state)), target_(target) {}

RestoreJob::~RestoreJob() {
  KV_CHECK(finished()) << "RestoreJob into " << Name(target_)
                       << " destroyed without Commit or Abort";
}

Status RestoreJob::Load() {
  State& s = *state_;
  RestorePhase expected = RestorePhase::kPrepared;
  if (!s.phase.compare_exchange_strong(expected, RestorePhase::kLoading)) {
    if (expected == RestorePhase::kFinished) {
      return CancelledError("restore into " + Name(target_) +
                            ": the job was aborted before Load");
    }
    return FailedPreconditionError("restore into " + Name(target_) +
                                   ": Load called twice");
  }
  Status status =
      s.placement == Placement::kReserved ? LoadIntoCells() : LoadIntoBuffer();
  s.phase.store(status.ok() ? RestorePhase::kLoaded
                            : RestorePhase::kLoadFailed);
  return status;
}

Status RestoreJob::LoadIntoCells() {
  State& s = *state_;
  return state_internal::LoadChunks(
      *s.file, s.validated, s.token_checksum,
      [&s](uint64_t t0, uint64_t t, state_internal::ChunkTargets* out) {
        state_internal::CellTargets(s.pages, s.page_size, t0, t, s.storage,
                                    out);
      },
      s.num_threads);
}

Status RestoreJob::LoadIntoBuffer() {
  State& s = *state_;
  const uint64_t cell_bytes = s.validated.header.layout.cell_bytes();
  const uint64_t bytes = s.validated.header.num_tokens * cell_bytes;
  s.payload = std::make_unique_for_overwrite<std::byte[]>(bytes);
  return state_internal::LoadChunks(
      *s.file, s.validated, s.token_checksum,
      [&s, cell_bytes](uint64_t t0, uint64_t t,
                       state_internal::ChunkTargets* out) {
        out->emplace_back(s.payload.get() + t0 * cell_bytes, t * cell_bytes);
      },
      s.num_threads);
}

StatusOr<RestoreResult> RestoreJob::Commit() {
  State& s = *state_;
  const std::string where = "restore into " + Name(target_);
  RestorePhase phase = s.phase.load();
  KV_CHECK(phase != RestorePhase::kLoading)
      << "RestoreJob::Commit while Load runs (" << where << ")";
  if (phase == RestorePhase::kFinished) {
    return FailedPreconditionError(where + ": already committed or aborted");
  }
  if (phase != RestorePhase::kLoaded) {
    Abort();
    return FailedPreconditionError(
        where + ": commit refused, Load " +
        (phase == RestorePhase::kPrepared ? "has not run" : "failed"));
  }
  const Status status = s.placement == Placement::kReserved
                            ? CommitReserved(where)
                            : CommitIntoTargetPages(where);
  s.phase.store(RestorePhase::kFinished);
  s.payload.reset();
  if (!status.ok()) {
    // The scratch cells were free before; dropping them restores the cache.
    s.cache->RemoveSequence(s.scratch);
    return status;
  }
  RestoreResult result;
  result.num_tokens = num_tokens();
  result.bytes_read = s.validated.header.file_bytes();
  result.elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - s.start)
                          .count();
  result.reused_target_pages = s.placement == Placement::kTargetPages;
  return result;
}

Status RestoreJob::CommitReserved(const std::string& where) {
  State& s = *state_;
  const SequenceTable& table = s.cache->table();
  const std::span<const PageId> pages = table.Pages(s.scratch);
  if (!table.Contains(s.scratch) || table.Length(s.scratch) != num_tokens() ||
      !std::equal(pages.begin(), pages.end(), s.pages.begin(), s.pages.end())) {
    return InternalError(where + ": the cells of the scratch sequence " +
                         Name(s.scratch) +
                         " were moved or freed while the job was in flight");
  }
  return s.cache->ReplaceSequence(target_, s.scratch);
}

Status RestoreJob::CommitIntoTargetPages(const std::string& where) {
  State& s = *state_;
  KvCache& cache = *s.cache;
  // Other sequences kept growing while Load ran: check again before the
  // old cells go, so that a pool that filled up meanwhile still leaves the
  // target as it was.
  if (!TargetPagesFit(cache, target_, s.scratch, s.tokens.size())) {
    return NoRoomError(cache, s.tokens.size(), false,
                       ResourceExhaustedError(
                           "other sequences took the free pages while the "
                           "file was read; " +
                           Name(target_) + " is unchanged"))
        .WithContext(where);
  }
  cache.RemoveSequence(target_);
  StatusOr<std::vector<CellId>> cells = cache.Append(target_, s.tokens);
  if (!cells.ok()) {
    // TargetPagesFit mirrors the placement, so this is a kvault bug.
    return InternalError(
        where + ": placing the cells failed after " + Name(target_) +
        "'s old cells were released: " + std::string(cells.status().message()));
  }
  const StateHeader& h = s.validated.header;
  const std::span<const PageId> pages = cache.table().Pages(target_);
  for (uint64_t c = 0; c < h.num_chunks(); ++c) {
    const uint64_t t0 = c * h.tokens_per_chunk;
    state_internal::ScatterChunk(pages, s.page_size, t0, h.chunk_tokens(c),
                                 s.payload.get() + t0 * h.layout.cell_bytes(),
                                 s.storage);
  }
  return Status::Ok();
}

void RestoreJob::Abort() {
  State& s = *state_;
  RestorePhase phase = s.phase.load();
  while (phase != RestorePhase::kFinished) {
    KV_CHECK(phase != RestorePhase::kLoading)
        << "RestoreJob::Abort while Load runs (restore into " << Name(target_)
        << ")";
    if (s.phase.compare_exchange_weak(phase, RestorePhase::kFinished)) {
      s.cache->RemoveSequence(s.scratch);
      s.payload.reset();
      return;
    }
  }
}

uint64_t RestoreJob::num_tokens() const {
  return state_->validated.header.num_tokens;
}

SeqId RestoreJob::scratch() const { return state_->scratch; }

bool RestoreJob::finished() const {
  return state_->phase.load() == RestorePhase::kFinished;
}

}  // namespace kvault
