// RestoreJob: the transactional restore of state_file.h split into Prepare
// (checks 1-11, reserve under a scratch sequence), Load (checks 12-13 and
// the scatter into the reserved cells, on any thread) and Commit/Abort.
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
#include "core/checksum.h"

namespace kvault {
namespace {

using state_internal::CellRun;
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

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

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
  if (cache->policy_name() == "contiguous+defrag" &&
      !cache->table().CanAppend(scratch, tokens.size()) &&
      OtherScratchExists(cache->table(), scratch)) {
    return ResourceExhaustedError(
        "no free run of pages for " + Name(scratch) +
        ", and defragmenting would move the cells of a restore in flight");
  }
  return cache->Append(scratch, tokens);
}

// Reserves cells for `tokens` under `scratch`, asking options.make_room
// once when the pool is full.
Status ReserveCells(KvCache* cache, SeqId scratch,
                    std::span<const TokenPos> tokens,
                    const RestoreOptions& options) {
  StatusOr<std::vector<CellId>> cells = AppendScratch(cache, scratch, tokens);
  bool asked = false;
  if (!cells.ok() && cells.status().IsResourceExhausted() &&
      options.make_room) {
    KV_RETURN_IF_ERROR(options.make_room(tokens.size()));
    asked = true;
    cells = AppendScratch(cache, scratch, tokens);
  }
  if (cells.ok()) return Status::Ok();
  if (!cells.status().IsResourceExhausted()) return cells.status();
  const PagePool& pool = cache->pool();
  const uint64_t pages =
      (tokens.size() + pool.page_size() - 1) / pool.page_size();
  return ResourceExhaustedError(
      "restore needs " + std::to_string(tokens.size()) + " cells (" +
      std::to_string(pages) + " pages of " + std::to_string(pool.page_size()) +
      "), the pool has " + std::to_string(pool.num_free_pages()) + " of " +
      std::to_string(pool.num_pages()) + " pages free" +
      (asked ? " after make_room" : "") + " (" +
      std::string(cells.status().message()) + ")");
}

// Copies a verified payload [t, cell_bytes] into the runs' cells.
void ScatterChunk(std::span<const CellRun> runs, const std::byte* payload,
                  KvStorage* storage) {
  const KvLayout& layout = storage->layout();
  const uint64_t num_cells = storage->num_cells();
  const uint64_t k_row_bytes = layout.k_row_bytes();
  const uint64_t v_row_bytes = layout.v_row_bytes();
  for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
    // One bounds-checked span per layer and side; the runs index into it.
    std::byte* k = storage->KRows(layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(k + run.first * k_row_bytes, payload,
                  run.count * k_row_bytes);
      payload += run.count * k_row_bytes;
    }
    std::byte* v = storage->VRows(layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(v + run.first * v_row_bytes, payload,
                  run.count * v_row_bytes);
      payload += run.count * v_row_bytes;
    }
  }
}

void AddToSummary(Xxh3Hasher& summary, uint64_t checksum) {
  std::byte le[8];
  StoreLe64(le, checksum);
  summary.Update(le, sizeof(le));
}

// Returns the summary mismatch error of check 13, or OK.
Status CheckSummary(const ValidatedFile& v, uint64_t computed) {
  if (computed == v.trailer.summary_checksum) return Status::Ok();
  return CorruptionError(
             "summary checksum (trailer at offset " +
             std::to_string(v.header.file_bytes() - kStateTrailerBytes) +
             ") mismatch: stored " + Hex64(v.trailer.summary_checksum) +
             ", computed " + Hex64(computed))
      .WithReason(kReasonChecksumMismatch);
}

// Reads, verifies (check 12) and scatters every chunk into the cells of
// `pages` (logical order), then verifies the summary (check 13). Touches
// no table: only the file and those cells' bytes in `storage`.
Status StreamChunks(const RandomAccessFile& file, const ValidatedFile& v,
                    uint64_t token_checksum, std::span<const PageId> pages,
                    uint32_t page_size, KvStorage* storage) {
  const StateHeader& h = v.header;
  const uint64_t cell_bytes = h.layout.cell_bytes();
  const uint64_t num_chunks = h.num_chunks();
  Xxh3Hasher summary;
  AddToSummary(summary, v.header_checksum);
  AddToSummary(summary, token_checksum);
  // [tokens_per_chunk, cell_bytes] payload + u64 checksum, reused.
  const uint64_t buffer_bytes =
      std::min<uint64_t>(h.tokens_per_chunk, h.num_tokens) * cell_bytes + 8;
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(buffer_bytes);
  std::vector<CellRun> runs;
  for (uint64_t c = 0; c < num_chunks; ++c) {
    const uint64_t t0 = c * h.tokens_per_chunk;
    const uint64_t t = h.chunk_tokens(c);
    const uint64_t payload_bytes = t * cell_bytes;
    const uint64_t offset = h.chunk_offset(c);
    const std::span<std::byte> chunk(buffer.get(), payload_bytes + 8);
    const std::string name =
        "chunk " + std::to_string(c) + " of " + std::to_string(num_chunks);
    KV_RETURN_IF_ERROR(state_internal::ReadExact(file, offset, chunk, name));
    const uint64_t stored = LoadLe64(chunk.data() + payload_bytes);
    const uint64_t computed = ChunkChecksum(chunk.first(payload_bytes), c);
    if (stored != computed) {
      return CorruptionError(name + " (file bytes " +
                             Range(offset, offset + payload_bytes + 8) +
                             ", tokens " + Range(t0, t0 + t) +
                             ") checksum mismatch: stored " + Hex64(stored) +
                             ", computed " + Hex64(computed))
          .WithReason(kReasonChecksumMismatch);
    }
    state_internal::CollectCellRuns(pages, page_size, t0, t0 + t, &runs);
    ScatterChunk(runs, chunk.data(), storage);
    AddToSummary(summary, stored);
  }
  return CheckSummary(v, summary.Digest());
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
  if (IsScratchSeq(target)) {
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
  // The scratch sequence's pages when Prepare reserved them: what Load
  // writes (it must not read the table, which the owner keeps using).
  std::vector<PageId> pages;
  uint32_t page_size = 0;
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
  KV_RETURN_IF_ERROR(ReserveCells(cache, scratch, tokens, options)
                         .WithContext("restore into " + Name(target)));
  const std::span<const PageId> pages = cache->table().Pages(scratch);
  state->pages.assign(pages.begin(), pages.end());
  state->file = std::move(file);
  state->cache = cache;
  state->storage = cache->storage();
  state->scratch = scratch;
  state->page_size = cache->pool().page_size();
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
  Status status = StreamChunks(*s.file, s.validated, s.token_checksum, s.pages,
                               s.page_size, s.storage);
  s.phase.store(status.ok() ? RestorePhase::kLoaded
                            : RestorePhase::kLoadFailed);
  return status;
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
  const SequenceTable& table = s.cache->table();
  const std::span<const PageId> pages = table.Pages(s.scratch);
  Status status;
  if (!table.Contains(s.scratch) || table.Length(s.scratch) != num_tokens() ||
      !std::equal(pages.begin(), pages.end(), s.pages.begin(), s.pages.end())) {
    status = InternalError(where + ": the cells of the scratch sequence " +
                           Name(s.scratch) +
                           " were moved or freed while the job was in flight");
  } else {
    status = s.cache->ReplaceSequence(target_, s.scratch);
  }
  s.phase.store(RestorePhase::kFinished);
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
  return result;
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
