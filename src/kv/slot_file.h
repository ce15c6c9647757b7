// Slot files: what a named save (POST /slots/{id}?action=save) writes. A
// slot file is a kvault state file (state_file.h) behind llama.cpp's
// sequence-state token header — magic "ggsq", version 2, the token payload
// in llama-server's packed form — so tools that read the token list of a
// llama-server slot file read a kvault one too, and a llama-server file
// given to kvault is recognised and refused by name rather than called
// garbage. Format: docs/state_file_format.md, "Slot files".
#ifndef KVAULT_KV_SLOT_FILE_H_
#define KVAULT_KV_SLOT_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_types.h"

namespace kvault {

// llama.cpp's sequence-state magic ('ggsq' as a little-endian u32) and
// the version it writes.
inline constexpr uint32_t kLlamaSeqMagic = 0x67677371u;
inline constexpr uint32_t kLlamaSeqVersion = 2;
// The first word of a packed token payload (LLAMA_TOKEN_NULL).
inline constexpr uint32_t kPackedTokensMarker = 0xFFFFFFFFu;
// The packed payload version kvault writes (readers accept any).
inline constexpr uint32_t kPackedTokensVersion = 1;
// Token words a header may hold: 2^24 tokens plus the packed fields.
inline constexpr uint64_t kMaxTokenWords = (uint64_t{1} << 24) + 4;

// What the token header in front of a state file says.
struct SlotFileHeader {
  // Where the kvault state file starts: 0 when the file has no token
  // header (a bare state file, as kvault wrote before slot files had one).
  uint64_t body_offset = 0;
  // The token ids the header lists (empty without a header).
  std::vector<TokenId> tokens;
  // True for llama-server's packed payload, false for a plain token list
  // (what servers before the packed form wrote).
  bool packed = false;
};

// Returns the token header for `tokens`: magic, version, payload length in
// words, then the packed payload [marker, version, n, ids..., 0 media].
std::string EncodeSlotFileHeader(std::span<const TokenPos> tokens);

// Reads the token header at the start of `file`. Corruption (truncated,
// bad_header) when the header is malformed; Unimplemented
// (version_unsupported) for another sequence-state version;
// FailedPrecondition (bad_header) for a payload holding media.
StatusOr<SlotFileHeader> ReadSlotFileHeader(const RandomAccessFile& file);

// Returns the bytes [offset, size) of `base` as a file of their own.
std::unique_ptr<RandomAccessFile> FileSuffix(
    std::unique_ptr<RandomAccessFile> base, uint64_t offset);

// A slot file opened for a restore.
struct OpenedSlotFile {
  std::unique_ptr<RandomAccessFile> state;  // the state file behind the header
  uint64_t header_bytes = 0;                // what precedes it
};

// Opens the slot file at `path` for a restore: reads its token header and
// returns the state file behind it, prefetched as PrefetchedFile::Open
// does. Corruption (bad_header) when the header's tokens are not the
// state's; bad_magic, naming llama.cpp, when the body is llama.cpp's own
// KV data. A state-file error is left to the restore, which reports it.
StatusOr<OpenedSlotFile> OpenSlotFile(Env* env, const std::string& path);

}  // namespace kvault

#endif  // KVAULT_KV_SLOT_FILE_H_
