// Reading, verifying and scattering a state file's K/V chunks for
// RestoreJob (restore_chunks.h).
#include "kv/restore_chunks.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kv/state_format.h"

namespace kvault::state_internal {
namespace {

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
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

// Reads chunk `c` into `chunk` (payload + checksum) and verifies it;
// returns its stored checksum.
StatusOr<uint64_t> ReadChunk(const RandomAccessFile& file, const StateHeader& h,
                             uint64_t c, std::span<std::byte> chunk) {
  const uint64_t t0 = c * h.tokens_per_chunk;
  const uint64_t t = h.chunk_tokens(c);
  const uint64_t payload_bytes = chunk.size() - 8;
  const uint64_t offset = h.chunk_offset(c);
  const std::string name =
      "chunk " + std::to_string(c) + " of " + std::to_string(h.num_chunks());
  KV_RETURN_IF_ERROR(ReadExact(file, offset, chunk, name));
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
  return stored;
}

}  // namespace

Status VerifyChunks(const RandomAccessFile& file, const ValidatedFile& v,
                    uint64_t token_checksum, const ChunkBufferFn& buffer_for,
                    const ChunkDoneFn& done) {
  const StateHeader& h = v.header;
  const uint64_t cell_bytes = h.layout.cell_bytes();
  std::vector<uint64_t> chunk_checksums;  // grows only as chunks verify
  for (uint64_t c = 0; c < h.num_chunks(); ++c) {
    const uint64_t t0 = c * h.tokens_per_chunk;
    const uint64_t t = h.chunk_tokens(c);
    const std::span<std::byte> chunk =
        buffer_for(c, t0, t).first(t * cell_bytes + 8);
    KV_ASSIGN_OR_RETURN(const uint64_t stored, ReadChunk(file, h, c, chunk));
    done(t0, t, chunk.data());
    chunk_checksums.push_back(stored);
  }
  return CheckSummary(
      v, SummaryChecksum(v.header_checksum, token_checksum, chunk_checksums));
}

void ScatterChunk(std::span<const PageId> pages, uint32_t page_size,
                  uint64_t t0, uint64_t t, const std::byte* payload,
                  KvStorage* storage) {
  std::vector<CellRun> runs;
  CollectCellRuns(pages, page_size, t0, t0 + t, &runs);
  const KvLayout& layout = storage->layout();
  const uint64_t num_cells = storage->num_cells();
  const uint64_t k_row_bytes = layout.k_row_bytes();
  const uint64_t v_row_bytes = layout.v_row_bytes();
  for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
    // One bounds-checked span per layer and side; the runs index into it.
    std::byte* k =
        storage->Rows(KvSide::kK, layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(k + run.first * k_row_bytes, payload,
                  run.count * k_row_bytes);
      payload += run.count * k_row_bytes;
    }
    std::byte* v =
        storage->Rows(KvSide::kV, layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(v + run.first * v_row_bytes, payload,
                  run.count * v_row_bytes);
      payload += run.count * v_row_bytes;
    }
  }
}

bool FitsInTargetPages(const KvCache& cache, SeqId target, uint64_t num_cells,
                       bool need_run) {
  const PagePool& pool = cache.pool();
  std::vector<bool> usable(pool.num_pages());
  for (uint32_t p = 0; p < pool.num_pages(); ++p) {
    usable[p] = pool.IsFree(PageId(p));
  }
  if (cache.table().Contains(target)) {
    // A page shared with another sequence stays in use after the target goes.
    for (PageId page : cache.table().Pages(target)) {
      if (pool.RefCount(page) == 1) usable[page.value()] = true;
    }
  }
  const uint64_t needed = PagesForCells(num_cells, pool.page_size());
  uint64_t total = 0;
  uint64_t run = 0;
  uint64_t longest = 0;
  for (bool u : usable) {
    total += u ? 1 : 0;
    run = u ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return (need_run ? longest : total) >= needed;
}

}  // namespace kvault::state_internal
