// PageRecord: how the prefix cache stores one full page of a chain, on
// disk (one file per record) and in a remote store (one value per record);
// the format is documented in docs/state_file_format.md ("Page records").
// A record is a 64-byte header naming the page's key and its parent's,
// followed by a complete state file holding exactly the page's cells, so a
// record read back goes through every check of the state-file reader
// (model, layout, checksums) and the same restore path as a slot file.
#ifndef KVAULT_KV_PAGE_RECORD_H_
#define KVAULT_KV_PAGE_RECORD_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/env.h"
#include "core/status_or.h"
#include "kv/kv_storage.h"
#include "kv/page_key.h"
#include "kv/restore_job.h"
#include "kv/state_file.h"

namespace kvault {

inline constexpr uint64_t kPageRecordHeaderBytes = 64;

struct PageRecordHeader {
  PageKey key;
  PageKey parent;
  uint64_t state_bytes = 0;  // the embedded state file's length
  friend bool operator==(const PageRecordHeader&,
                         const PageRecordHeader&) = default;
};

// Returns the 64 header bytes of `header`.
std::array<std::byte, kPageRecordHeaderBytes> EncodePageRecordHeader(
    const PageRecordHeader& header);
// Decodes a record's first bytes. Corruption with reason truncated (fewer
// than 64 bytes), bad_magic, checksum_mismatch (header checksum) or
// bad_header (reserved bytes not zero).
StatusOr<PageRecordHeader> DecodePageRecordHeader(
    std::span<const std::byte> bytes);

// Returns the snapshot of page `index` of `snapshot`: that page's cells
// (all of them, or the filled part of a last page) and that page.
// Precondition: index * page_size < snapshot.tokens.size().
SaveSnapshot PageSnapshot(const SaveSnapshot& snapshot, size_t index);

// Writes the record of the one-page snapshot `page`, keyed `key` after
// `parent`, to `out` (appended, neither synced nor closed); returns the
// bytes written. InvalidArgument when `page` is not one page holding 1 to
// page_size cells (a full page, or a tail: TailKey).
StatusOr<uint64_t> WritePageRecord(const KvStorage& storage,
                                   const SaveSnapshot& page,
                                   const PageKey& key, const PageKey& parent,
                                   const SaveOptions& options,
                                   WritableFile* out);

// Checks that the record in `file` is the page keyed `key` after `parent`
// and as long as its header says, and returns its embedded state file (a
// view of `file`, which must outlive it) for RestoreSequence. Corruption:
// DecodePageRecordHeader's errors; bad_header when the record names
// another key or parent (it is not the page asked for); truncated or
// trailing_bytes when the length differs.
StatusOr<std::unique_ptr<RandomAccessFile>> OpenPageRecord(
    const RandomAccessFile& file, const PageKey& key, const PageKey& parent);

}  // namespace kvault

#endif  // KVAULT_KV_PAGE_RECORD_H_
