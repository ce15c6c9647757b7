// The reading half of state_file.h: checks 1-11 of docs/state_file_format.md
// (shared with RestoreJob, which runs checks 12-13 and the transactional
// restore) and RestoreSequence as a RestoreJob run start to finish.
#include <array>
#include <memory>
#include <string>

#include "core/checksum.h"
#include "kv/restore_job.h"
#include "kv/state_file.h"

namespace kvault {
namespace {

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

}  // namespace

namespace state_internal {

// A short read means the file shrank after it was opened (truncated).
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

}  // namespace state_internal

namespace {

// Lends a caller's file to a RestoreJob, which wants to own one.
class BorrowedFile final : public RandomAccessFile {
 public:
  explicit BorrowedFile(const RandomAccessFile& file) : file_(file) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    return file_.ReadAt(offset, out);
  }
  uint64_t size() const override { return file_.size(); }

 private:
  const RandomAccessFile& file_;
};

}  // namespace

StatusOr<StateHeader> ReadStateHeader(const RandomAccessFile& file) {
  KV_ASSIGN_OR_RETURN(state_internal::ValidatedFile v,
                      state_internal::ReadHeaderAndTrailer(file));
  return v.header;
}

StatusOr<RestoreResult> RestoreSequence(const RandomAccessFile& file,
                                        const ModelFingerprint& fingerprint,
                                        SeqId target, KvCache* cache,
                                        const RestoreOptions& options) {
  KV_ASSIGN_OR_RETURN(
      std::unique_ptr<RestoreJob> job,
      RestoreJob::Prepare(std::make_unique<BorrowedFile>(file), fingerprint,
                          cache, target, kRestoreScratchSeq, options));
  if (Status loaded = job->Load(); !loaded.ok()) {
    job->Abort();
    return loaded;
  }
  return job->Commit();  // drops the scratch cells itself on failure
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
