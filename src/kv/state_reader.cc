// The reading half of state_file.h: checks 1-13 of docs/state_file_format.md
// and the transactional restore (reserve under a scratch sequence, verify
// each chunk before scattering it, commit with ReplaceSequence).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/checksum.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

using state_internal::CellRun;

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Reads exactly out.size() bytes at `offset`: an I/O error keeps its code
// and gains the offset; a short read means the file shrank (truncated).
Status ReadExact(const RandomAccessFile& file, uint64_t offset,
                 std::span<std::byte> out, std::string_view what) {
  StatusOr<size_t> n = file.ReadAt(offset, out);
  if (!n.ok()) {
    return n.status().WithContext("reading " + std::string(what) +
                                  " at offset " + std::to_string(offset));
  }
  if (*n != out.size()) {
    return CorruptionError("truncated: reading " + std::string(what) +
                           " at offset " + std::to_string(offset) + " got " +
                           std::to_string(*n) + " of " +
                           std::to_string(out.size()) + " bytes")
        .WithReason(kReasonTruncated);
  }
  return Status::Ok();
}

// What checks 1-7 establish, plus the checksums the summary needs.
struct ValidatedFile {
  StateHeader header;
  StateTrailer trailer;
  uint64_t header_checksum = 0;
};

StatusOr<ValidatedFile> ReadHeaderAndTrailer(const RandomAccessFile& file) {
  const uint64_t size = file.size();
  if (size < kStateHeaderBytes) {  // check 1
    return CorruptionError("file is " + std::to_string(size) +
                           " bytes, shorter than the 128-byte header")
        .WithReason(kReasonTruncated);
  }
  std::array<std::byte, kStateHeaderBytes> header_bytes;
  KV_RETURN_IF_ERROR(ReadExact(file, 0, header_bytes, "header"));
  ValidatedFile v;
  KV_ASSIGN_OR_RETURN(v.header, DecodeHeader(header_bytes));  // checks 2-5
  v.header_checksum = LoadLe64(header_bytes.data() + kStateHeaderBytes - 8);
  const uint64_t expected = v.header.file_bytes();
  if (size != expected) {  // check 6
    return CorruptionError("file is " + std::to_string(size) +
                           " bytes, header implies " + std::to_string(expected))
        .WithReason(size < expected ? kReasonTruncated : kReasonTrailingBytes);
  }
  std::array<std::byte, kStateTrailerBytes> trailer_bytes;
  KV_RETURN_IF_ERROR(
      ReadExact(file, size - kStateTrailerBytes, trailer_bytes, "trailer"));
  KV_ASSIGN_OR_RETURN(v.trailer, DecodeTrailer(trailer_bytes, expected));
  return v;
}

// Reads the token table and verifies its checksum (check 11).
Status ReadTokenTable(const RandomAccessFile& file, const StateHeader& h,
                      std::vector<TokenPos>* tokens, uint64_t* checksum) {
  const uint64_t table_bytes = h.num_tokens * kStateTokenRecordBytes;
  // [num_tokens, 8] records, then the u64 checksum.
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(table_bytes + 8);
  const std::span<std::byte> bytes(buffer.get(), table_bytes + 8);
  KV_RETURN_IF_ERROR(ReadExact(file, kStateHeaderBytes, bytes, "token table"));
  const uint64_t stored = LoadLe64(bytes.data() + table_bytes);
  const uint64_t computed = Xxh3_64(bytes.data(), table_bytes);
  if (stored != computed) {
    return CorruptionError(
               "token table (file bytes " +
               Range(kStateHeaderBytes, kStateHeaderBytes + table_bytes) +
               ") checksum mismatch: stored " + Hex64(stored) + ", computed " +
               Hex64(computed))
        .WithReason(kReasonChecksumMismatch);
  }
  tokens->resize(h.num_tokens);
  DecodeTokenRecords(bytes.first(table_bytes), *tokens);
  *checksum = stored;
  return Status::Ok();
}

// Reserves cells for `tokens` under the scratch sequence, asking
// options.make_room once when the pool is full.
Status ReserveCells(KvCache* cache, std::span<const TokenPos> tokens,
                    const RestoreOptions& options) {
  StatusOr<std::vector<CellId>> cells =
      cache->Append(kRestoreScratchSeq, tokens);
  bool asked = false;
  if (!cells.ok() && cells.status().IsResourceExhausted() &&
      options.make_room) {
    KV_RETURN_IF_ERROR(options.make_room(tokens.size()));
    asked = true;
    cells = cache->Append(kRestoreScratchSeq, tokens);
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

// Reads, verifies (check 12) and scatters every chunk into the scratch
// sequence's cells, then verifies the summary (check 13).
Status StreamChunks(const RandomAccessFile& file, const ValidatedFile& v,
                    uint64_t token_checksum, KvCache* cache) {
  const StateHeader& h = v.header;
  const uint64_t cell_bytes = h.layout.cell_bytes();
  const uint64_t num_chunks = h.num_chunks();
  const std::span<const PageId> pages =
      cache->table().Pages(kRestoreScratchSeq);
  const uint32_t page_size = cache->pool().page_size();
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
    state_internal::CollectCellRuns(pages, page_size, t0, t0 + t, &runs);
    ScatterChunk(runs, chunk.data(), cache->storage());
    AddToSummary(summary, stored);
  }
  const uint64_t computed = summary.Digest();
  if (computed != v.trailer.summary_checksum) {
    return CorruptionError("summary checksum (trailer at offset " +
                           std::to_string(h.file_bytes() - kStateTrailerBytes) +
                           ") mismatch: stored " +
                           Hex64(v.trailer.summary_checksum) + ", computed " +
                           Hex64(computed))
        .WithReason(kReasonChecksumMismatch);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StateHeader> ReadStateHeader(const RandomAccessFile& file) {
  KV_ASSIGN_OR_RETURN(ValidatedFile v, ReadHeaderAndTrailer(file));
  return v.header;
}

StatusOr<RestoreResult> RestoreSequence(const RandomAccessFile& file,
                                        const ModelFingerprint& fingerprint,
                                        SeqId target, KvCache* cache,
                                        const RestoreOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string target_name = "seq#" + std::to_string(target.value());
  if (cache->storage() == nullptr) {
    return FailedPreconditionError("restore into " + target_name +
                                   ": the cache keeps no K/V data (no layout)");
  }
  if (target == kRestoreScratchSeq) {
    return InvalidArgumentError("restore: " + target_name +
                                " is the reserved restore scratch sequence");
  }
  KV_ASSIGN_OR_RETURN(ValidatedFile v, ReadHeaderAndTrailer(file));
  KV_RETURN_IF_ERROR(
      CheckCompatible(v.header, cache->storage()->layout(), fingerprint));
  if (cache->table().Contains(kRestoreScratchSeq)) {
    return FailedPreconditionError(
        "restore into " + target_name + ": the scratch sequence seq#" +
        std::to_string(kRestoreScratchSeq.value()) +
        " exists (another restore in progress, or a caller uses its id)");
  }
  std::vector<TokenPos> tokens;
  uint64_t token_checksum = 0;
  KV_RETURN_IF_ERROR(ReadTokenTable(file, v.header, &tokens, &token_checksum));
  KV_RETURN_IF_ERROR(ReserveCells(cache, tokens, options)
                         .WithContext("restore into " + target_name));
  Status s = StreamChunks(file, v, token_checksum, cache);
  if (s.ok()) s = cache->ReplaceSequence(target, kRestoreScratchSeq);
  if (!s.ok()) {
    // The scratch cells were free before; dropping them restores the cache.
    cache->RemoveSequence(kRestoreScratchSeq);
    return s;
  }
  RestoreResult result;
  result.num_tokens = v.header.num_tokens;
  result.bytes_read = v.header.file_bytes();
  result.elapsed_ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  return result;
}

StatusOr<RestoreResult> RestoreSequenceFromFile(
    Env* env, const std::string& path, const ModelFingerprint& fingerprint,
    SeqId target, KvCache* cache, const RestoreOptions& options) {
  StatusOr<std::unique_ptr<RandomAccessFile>> file =
      env->NewRandomAccessFile(path);
  if (!file.ok()) return file.status().WithContext(path);
  StatusOr<RestoreResult> result =
      RestoreSequence(**file, fingerprint, target, cache, options);
  if (!result.ok()) return result.status().WithContext(path);
  return result;
}

}  // namespace kvault
