// The writing half of state_file.h and restore_job.h: TakeSaveSnapshot
// copies what a save needs from the table; WriteSnapshot streams it from
// storage through one chunk buffer; WriteSnapshotToFile wraps that in the
// temp-file + rename protocol of docs/state_file_format.md. The synchronous
// WriteSequenceState / SaveSequenceToFile are snapshot + write.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "core/check.h"
#include "core/checksum.h"
#include "kv/restore_job.h"
#include "kv/slot_file.h"
#include "kv/state_file.h"
#include "kv/temp_files.h"

namespace kvault {

namespace state_internal {

void CollectCellRuns(std::span<const PageId> pages, uint32_t page_size,
                     uint64_t begin, uint64_t end, std::vector<CellRun>* runs) {
  KV_CHECK_LE(end, uint64_t{pages.size()} * page_size);
  runs->clear();
  uint64_t i = begin;
  while (i < end) {
    const uint64_t offset = i % page_size;
    const uint64_t cell =
        uint64_t{pages[i / page_size].value()} * page_size + offset;
    const uint64_t count = std::min<uint64_t>(page_size - offset, end - i);
    if (!runs->empty() && runs->back().first + runs->back().count == cell) {
      runs->back().count += count;
    } else {
      runs->push_back({cell, count});
    }
    i += count;
  }
}

}  // namespace state_internal

namespace {

using state_internal::CellRun;

std::string SeqName(SeqId seq) { return "seq#" + std::to_string(seq.value()); }

// Smallest buffer worth streaming the token table through.
constexpr uint64_t kMinStagingBytes = uint64_t{64} << 10;

// Copies the payload of one chunk (per layer: K rows, then V rows of the
// runs' cells) from `storage` into `payload` [t, cell_bytes].
void GatherChunk(const KvStorage& storage, std::span<const CellRun> runs,
                 std::byte* payload) {
  const KvLayout& layout = storage.layout();
  const uint64_t num_cells = storage.num_cells();
  const uint64_t k_row_bytes = layout.k_row_bytes();
  const uint64_t v_row_bytes = layout.v_row_bytes();
  for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
    // One bounds-checked span per layer and side; the runs index into it.
    const std::byte* k =
        storage.Rows(KvSide::kK, layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(payload, k + run.first * k_row_bytes,
                  run.count * k_row_bytes);
      payload += run.count * k_row_bytes;
    }
    const std::byte* v =
        storage.Rows(KvSide::kV, layer, CellId(0), num_cells).data();
    for (const CellRun& run : runs) {
      std::memcpy(payload, v + run.first * v_row_bytes,
                  run.count * v_row_bytes);
      payload += run.count * v_row_bytes;
    }
  }
}

Status AppendAt(WritableFile* out, std::span<const std::byte> data,
                uint64_t* offset, std::string_view what) {
  Status s = out->Append(data);
  if (!s.ok()) {
    return s.WithContext("writing " + std::string(what) + " at offset " +
                         std::to_string(*offset));
  }
  *offset += data.size();
  return Status::Ok();
}

// Writes the token table and its checksum through `staging`; returns the
// checksum.
StatusOr<uint64_t> WriteTokenTable(std::span<const TokenPos> tokens,
                                   std::span<std::byte> staging,
                                   WritableFile* out, uint64_t* offset) {
  const uint64_t per_piece = staging.size() / kStateTokenRecordBytes;
  Xxh3Hasher hasher;
  for (uint64_t i = 0; i < tokens.size(); i += per_piece) {
    const uint64_t n = std::min<uint64_t>(per_piece, tokens.size() - i);
    const std::span<std::byte> piece =
        staging.first(n * kStateTokenRecordBytes);
    EncodeTokenRecords(tokens.subspan(i, n), piece);
    hasher.Update(piece.data(), piece.size());
    KV_RETURN_IF_ERROR(AppendAt(out, piece, offset, "token table"));
  }
  const uint64_t checksum = hasher.Digest();
  std::byte le[8];
  StoreLe64(le, checksum);
  KV_RETURN_IF_ERROR(AppendAt(out, le, offset, "token checksum"));
  return checksum;
}

// Writes every chunk (payload + checksum), appending each checksum to
// `checksums`.
Status WriteChunks(const StateHeader& h, const KvStorage& storage,
                   std::span<const PageId> pages, uint32_t page_size,
                   std::span<std::byte> buffer, WritableFile* out,
                   uint64_t* offset, std::vector<uint64_t>* checksums) {
  const uint64_t cell_bytes = h.layout.cell_bytes();
  const uint64_t num_chunks = h.num_chunks();
  std::vector<CellRun> runs;
  for (uint64_t c = 0; c < num_chunks; ++c) {
    const uint64_t t0 = c * h.tokens_per_chunk;
    const uint64_t t = h.chunk_tokens(c);
    state_internal::CollectCellRuns(pages, page_size, t0, t0 + t, &runs);
    const std::span<std::byte> payload = buffer.first(t * cell_bytes);
    GatherChunk(storage, runs, payload.data());
    const uint64_t checksum = ChunkChecksum(payload, c);
    StoreLe64(payload.data() + payload.size(), checksum);
    checksums->push_back(checksum);
    KV_RETURN_IF_ERROR(AppendAt(
        out, buffer.first(payload.size() + 8), offset,
        "chunk " + std::to_string(c) + " of " + std::to_string(num_chunks)));
  }
  return Status::Ok();
}

// Producer strings are informational; keep them within the format's rules
// (printable ASCII, at most 32 bytes) instead of failing the save.
std::string SanitizeProducer(const std::string& producer) {
  std::string out = producer.substr(0, kStateProducerBytes);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7F) {
      c = '?';
    }
  }
  return out;
}

// Returns InvalidArgument when `snapshot` does not describe cells of
// `storage`: gathering from it would read out of bounds.
Status CheckSnapshotFits(const KvStorage& storage, const SaveSnapshot& snap) {
  const std::string where = "save " + SeqName(snap.seq) + ": snapshot ";
  if (!(snap.layout == storage.layout())) {
    return InvalidArgumentError(where + "layout " + snap.layout.ToString() +
                                " differs from the storage's " +
                                storage.layout().ToString());
  }
  if (snap.page_size == 0 ||
      uint64_t{snap.pages.size()} * snap.page_size < snap.tokens.size()) {
    return InvalidArgumentError(
        where + "has " + std::to_string(snap.pages.size()) + " pages of " +
        std::to_string(snap.page_size) + " cells for " +
        std::to_string(snap.tokens.size()) + " tokens");
  }
  for (PageId page : snap.pages) {
    if ((uint64_t{page.value()} + 1) * snap.page_size > storage.num_cells()) {
      return InvalidArgumentError(
          where + "names page#" + std::to_string(page.value()) +
          " beyond the storage's " + std::to_string(storage.num_cells()) +
          " cells");
    }
  }
  return Status::Ok();
}

// Returns the header of `snap`'s file; FailedPrecondition when the sequence
// is beyond the format's limits.
StatusOr<StateHeader> SnapshotHeader(const SaveSnapshot& snap,
                                     const SaveOptions& options) {
  StateHeader h;
  h.producer = SanitizeProducer(options.producer);
  h.fingerprint = snap.fingerprint;
  h.layout = snap.layout;
  h.tokens_per_chunk =
      ChooseTokensPerChunk(h.layout, options.target_chunk_bytes);
  h.num_tokens = snap.tokens.size();
  if (Status s = ValidateHeaderFields(h); !s.ok()) {
    return FailedPreconditionError(
        "save " + SeqName(snap.seq) +
        ": not representable as a state file: " + std::string(s.message()));
  }
  return h;
}

// Streams `snap`'s state to `out`, reading K/V from `storage`; returns the
// bytes written.

// Writes the file at `tmp` (synced when options.sync) and closes it; on
// failure the file is closed and removed.
StatusOr<uint64_t> WriteTempFile(Env* env, const KvStorage& storage,
                                 const SaveSnapshot& snap,
                                 const std::string& tmp,
                                 const SaveOptions& options) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                      env->NewWritableFile(tmp));
  std::string header;
  if (options.llama_token_header) header = EncodeSlotFileHeader(snap.tokens);
  Status s = header.empty() ? Status::Ok() : file->Append(header);
  StatusOr<uint64_t> written =
      s.ok() ? WriteSnapshot(storage, snap, options, file.get())
             : StatusOr<uint64_t>(s);
  if (written.ok()) *written += header.size();
  s = written.status();
  if (s.ok() && options.sync) s = file->Sync();
  if (s.ok()) {
    s = file->Close();
  } else {
    (void)file->Close();  // the first error is the one to report
  }
  if (!s.ok()) {
    file.reset();
    (void)env->RemoveFile(tmp);  // best effort; the write error matters
    return s;
  }
  return written;
}

}  // namespace

StatusOr<uint64_t> WriteSnapshot(const KvStorage& storage,
                                 const SaveSnapshot& snap,
                                 const SaveOptions& options,
                                 WritableFile* out) {
  KV_RETURN_IF_ERROR(CheckSnapshotFits(storage, snap));
  KV_ASSIGN_OR_RETURN(const StateHeader h, SnapshotHeader(snap, options));
  const std::array<std::byte, kStateHeaderBytes> header = EncodeHeader(h);

  // [tokens_per_chunk, cell_bytes] payload + checksum; also stages the
  // token table.
  const uint64_t chunk_bytes =
      std::min<uint64_t>(h.tokens_per_chunk, h.num_tokens) *
          h.layout.cell_bytes() +
      kStateChecksumBytes;
  const uint64_t buffer_bytes = std::max(chunk_bytes, kMinStagingBytes);
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(buffer_bytes);
  const std::span<std::byte> staging(buffer.get(), buffer_bytes);

  uint64_t offset = 0;
  KV_RETURN_IF_ERROR(AppendAt(out, header, &offset, "header"));
  KV_ASSIGN_OR_RETURN(uint64_t token_checksum,
                      WriteTokenTable(snap.tokens, staging, out, &offset));
  std::vector<uint64_t> chunk_checksums;
  chunk_checksums.reserve(h.num_chunks());
  KV_RETURN_IF_ERROR(WriteChunks(h, storage, snap.pages, snap.page_size,
                                 staging, out, &offset, &chunk_checksums));
  const uint64_t summary =
      SummaryChecksum(LoadLe64(header.data() + kStateHeaderBytes - 8),
                      token_checksum, chunk_checksums);
  const auto trailer = EncodeTrailer({offset + kStateTrailerBytes, summary});
  KV_RETURN_IF_ERROR(AppendAt(out, trailer, &offset, "trailer"));
  KV_CHECK_EQ(offset, h.file_bytes());
  return offset;
}

StatusOr<SaveSnapshot> TakeSaveSnapshot(const KvCache& cache, SeqId seq,
                                        const ModelFingerprint& fingerprint) {
  const KvStorage* storage = cache.storage();
  if (storage == nullptr) {
    return FailedPreconditionError("save " + SeqName(seq) +
                                   ": the cache keeps no K/V data (no layout)");
  }
  const SequenceTable& table = cache.table();
  if (!table.Contains(seq)) {
    return NotFoundError("save: " + SeqName(seq) + " does not exist");
  }
  SaveSnapshot snap;
  snap.fingerprint = fingerprint;
  snap.layout = storage->layout();
  snap.page_size = cache.pool().page_size();
  const std::span<const TokenPos> tokens = table.Cells(seq);
  snap.tokens.assign(tokens.begin(), tokens.end());
  const std::span<const PageId> pages = table.Pages(seq);
  snap.pages.assign(pages.begin(), pages.end());
  snap.seq = seq;
  return snap;
}

StatusOr<uint64_t> WriteSequenceState(const KvCache& cache, SeqId seq,
                                      const ModelFingerprint& fingerprint,
                                      const SaveOptions& options,
                                      WritableFile* out) {
  KV_ASSIGN_OR_RETURN(const SaveSnapshot snap,
                      TakeSaveSnapshot(cache, seq, fingerprint));
  return WriteSnapshot(*cache.storage(), snap, options, out);
}

StatusOr<SaveResult> WriteSnapshotToFile(Env* env, const KvStorage& storage,
                                         const SaveSnapshot& snapshot,
                                         const std::string& path,
                                         const SaveOptions& options) {
  const uint64_t start_micros = env->NowMicros();
  const std::string context = "save " + SeqName(snapshot.seq) + " to " + path;
  const std::string tmp = TempPathFor(path);
  StatusOr<uint64_t> written =
      WriteTempFile(env, storage, snapshot, tmp, options);
  if (!written.ok()) return written.status().WithContext(context);
  Status s = env->RenameFile(tmp, path);
  if (!s.ok()) {
    (void)env->RemoveFile(tmp);  // best effort; the rename error matters
    return s.WithContext(context);
  }
  if (options.sync) {
    // The new file is in place but its name is not durable yet.
    KV_RETURN_IF_ERROR(env->SyncDir(DirName(path)).WithContext(context));
  }
  SaveResult result;
  result.num_tokens = snapshot.tokens.size();
  result.bytes_written = *written;
  result.elapsed_ms = double(env->NowMicros() - start_micros) / 1000.0;
  return result;
}

StatusOr<SaveResult> SaveSequenceToFile(Env* env, const KvCache& cache,
                                        SeqId seq,
                                        const ModelFingerprint& fingerprint,
                                        const std::string& path,
                                        const SaveOptions& options) {
  StatusOr<SaveSnapshot> snap = TakeSaveSnapshot(cache, seq, fingerprint);
  if (!snap.ok()) {
    return snap.status().WithContext("save " + SeqName(seq) + " to " + path);
  }
  return WriteSnapshotToFile(env, *cache.storage(), *snap, path, options);
}

}  // namespace kvault
