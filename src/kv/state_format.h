// The on-disk layout of a state file, version 1 (docs/state_file_format.md is
// the specification; this file is its code). Pure encoding and validation:
// no I/O, no cache.
#ifndef KVAULT_KV_STATE_FORMAT_H_
#define KVAULT_KV_STATE_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status_or.h"
#include "kv/kv_layout.h"
#include "kv/kv_types.h"
#include "kv/model_fingerprint.h"

namespace kvault {

inline constexpr char kStateMagic[8] = {'K', 'V', 'A', 'U', 'L', 'T', 'K', 'V'};
inline constexpr char kStateEndMagic[8] = {'K', 'V', 'A', 'U',
                                           'L', 'T', 'N', 'D'};
inline constexpr uint32_t kStateFormatVersion = 1;
inline constexpr uint64_t kStateHeaderBytes = 128;
inline constexpr uint64_t kStateTrailerBytes = 24;
inline constexpr uint64_t kStateTokenRecordBytes = 8;
inline constexpr uint64_t kStateChecksumBytes = 8;
inline constexpr uint32_t kStateMaxTokensPerChunk = uint32_t{1} << 20;
inline constexpr uint64_t kStateMaxTokens = (uint64_t{1} << 31) - 1;
inline constexpr uint64_t kStateMaxFileBytes = uint64_t{1} << 62;
inline constexpr size_t kStateProducerBytes = 32;

// Stable reason tags (Status::reason()) of state-file errors; the table in
// docs/state_file_format.md says which check yields which.
inline constexpr char kReasonTruncated[] = "truncated";
inline constexpr char kReasonBadMagic[] = "bad_magic";
inline constexpr char kReasonChecksumMismatch[] = "checksum_mismatch";
inline constexpr char kReasonVersionUnsupported[] = "version_unsupported";
inline constexpr char kReasonBadHeader[] = "bad_header";
inline constexpr char kReasonTrailingBytes[] = "trailing_bytes";
inline constexpr char kReasonBadTrailer[] = "bad_trailer";
inline constexpr char kReasonModelMismatch[] = "model_mismatch";
inline constexpr char kReasonLayoutMismatch[] = "layout_mismatch";
inline constexpr char kReasonDtypeMismatch[] = "dtype_mismatch";

// The decoded header of a state file.
struct StateHeader {
  uint32_t format_version = kStateFormatVersion;
  std::string producer;  // at most kStateProducerBytes ASCII bytes
  ModelFingerprint fingerprint;
  KvLayout layout;
  uint32_t tokens_per_chunk = 1;
  uint64_t num_tokens = 0;

  // Returns ceil(num_tokens / tokens_per_chunk).
  uint64_t num_chunks() const;
  // Returns the token count of chunk `c` (< num_chunks()).
  uint64_t chunk_tokens(uint64_t c) const;
  // Returns the file offset where chunk `c`'s payload starts.
  uint64_t chunk_offset(uint64_t c) const;
  // Returns the total file length the header implies (validated headers only).
  uint64_t file_bytes() const;
};

// Picks tokens_per_chunk so a chunk is about `target_chunk_bytes` (at least 1
// token, at most kStateMaxTokensPerChunk).
uint32_t ChooseTokensPerChunk(const KvLayout& layout,
                              uint64_t target_chunk_bytes);

// Encodes `header` (which must pass ValidateHeaderFields) into 128 bytes,
// checksum included.
std::array<std::byte, kStateHeaderBytes> EncodeHeader(const StateHeader& header);
// Decodes and validates 128 header bytes: checks 2-5 of the format document
// (magic, header checksum, version, field ranges), each failure with its
// reason and the offset.
StatusOr<StateHeader> DecodeHeader(std::span<const std::byte> bytes);
// Returns OK when every field is in range and file_bytes() <=
// kStateMaxFileBytes (check 5); Corruption/bad_header naming the field.
Status ValidateHeaderFields(const StateHeader& header);
// Checks 8-10: fingerprint, layout and dtype against what the caller has;
// FailedPrecondition with its reason, naming both values.
Status CheckCompatible(const StateHeader& header, const KvLayout& layout,
                       const ModelFingerprint& fingerprint);

// The 24-byte trailer.
struct StateTrailer {
  uint64_t file_bytes = 0;
  uint64_t summary_checksum = 0;
};
// Encodes a trailer, end magic included.
std::array<std::byte, kStateTrailerBytes> EncodeTrailer(const StateTrailer& t);
// Decodes a trailer; Corruption/bad_trailer on a wrong end magic or when
// file_bytes differs from `expected_file_bytes`.
StatusOr<StateTrailer> DecodeTrailer(std::span<const std::byte> bytes,
                                     uint64_t expected_file_bytes);

// Returns the seed of chunk `c`'s checksum (c + 1).
inline uint64_t ChunkChecksumSeed(uint64_t c) { return c + 1; }

// --- Encoding helpers shared by the writer and the reader -----------------
// Returns `v` as "0x" + 16 hex digits, how error messages show checksums.
std::string Hex64(uint64_t v);
// Stores `v` little-endian into p[0, 8).
inline void StoreLe64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
// Loads a little-endian u64 from p[0, 8).
inline uint64_t LoadLe64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= uint64_t{std::to_integer<uint8_t>(p[i])} << (8 * i);
  }
  return v;
}
// Encodes `tokens` as token-table records into out [tokens.size(), 8].
void EncodeTokenRecords(std::span<const TokenPos> tokens,
                        std::span<std::byte> out);
// Decodes token-table records in [out.size(), 8] into `out`.
void DecodeTokenRecords(std::span<const std::byte> records,
                        std::span<TokenPos> out);
// Returns the checksum of chunk `c`'s payload (XXH3-64, seed c + 1).
uint64_t ChunkChecksum(std::span<const std::byte> payload, uint64_t c);
// Returns the trailer's summary checksum: XXH3-64 (seed 0) of the
// little-endian u64s `header_checksum`, `token_checksum`, then every
// chunk's checksum in order. The writer and check 13 both call it, so the
// two cannot drift apart.
uint64_t SummaryChecksum(uint64_t header_checksum, uint64_t token_checksum,
                         std::span<const uint64_t> chunk_checksums);

}  // namespace kvault

#endif  // KVAULT_KV_STATE_FORMAT_H_
