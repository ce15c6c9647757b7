#include "kv/page_record.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/checksum.h"
#include "core/memory_file.h"
#include "core/reasons.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'P', 'A', 'G', 'E', '0', '1'};
constexpr uint64_t kChecksumOffset = kPageRecordHeaderBytes - 8;

// A window [offset, offset + size) of another file.
class FileWindow final : public RandomAccessFile {
 public:
  FileWindow(const RandomAccessFile& file, uint64_t offset, uint64_t size)
      : file_(file), offset_(offset), size_(size) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    if (offset >= size_) return size_t{0};
    const uint64_t n = std::min<uint64_t>(out.size(), size_ - offset);
    return file_.ReadAt(offset_ + offset, out.first(n));
  }
  uint64_t size() const override { return size_; }

 private:
  const RandomAccessFile& file_;
  uint64_t offset_;
  uint64_t size_;
};

std::string Describe(const PageKey& key, const PageKey& parent) {
  return "page " + key.ToHex() + " after " + parent.ToHex();
}

}  // namespace

std::array<std::byte, kPageRecordHeaderBytes> EncodePageRecordHeader(
    const PageRecordHeader& header) {
  std::array<std::byte, kPageRecordHeaderBytes> out{};
  for (size_t i = 0; i < sizeof(kMagic); ++i) {
    out[i] = static_cast<std::byte>(kMagic[i]);
  }
  StoreLe64(out.data() + 8, header.key.lo);
  StoreLe64(out.data() + 16, header.key.hi);
  StoreLe64(out.data() + 24, header.parent.lo);
  StoreLe64(out.data() + 32, header.parent.hi);
  StoreLe64(out.data() + 40, header.state_bytes);
  // Bytes [48, 56) are reserved (zero).
  StoreLe64(out.data() + kChecksumOffset, Xxh3_64(out.data(), kChecksumOffset));
  return out;
}

StatusOr<PageRecordHeader> DecodePageRecordHeader(
    std::span<const std::byte> bytes) {
  if (bytes.size() < kPageRecordHeaderBytes) {
    return CorruptionError("page record of " + std::to_string(bytes.size()) +
                           " bytes; its header alone takes " +
                           std::to_string(kPageRecordHeaderBytes))
        .WithReason(kReasonTruncated);
  }
  if (!std::equal(kMagic, kMagic + 8, bytes.begin(), [](char c, std::byte b) {
        return static_cast<std::byte>(c) == b;
      })) {
    return CorruptionError("not a page record: magic is not KVPAGE01")
        .WithReason(kReasonBadMagic);
  }
  const uint64_t stored = LoadLe64(bytes.data() + kChecksumOffset);
  const uint64_t actual = Xxh3_64(bytes.data(), kChecksumOffset);
  if (stored != actual) {
    return CorruptionError("page record header checksum is " + Hex64(stored) +
                           "; the header hashes to " + Hex64(actual))
        .WithReason(kReasonChecksumMismatch);
  }
  if (LoadLe64(bytes.data() + 48) != 0) {
    return CorruptionError("page record header: reserved bytes are not zero")
        .WithReason(kReasonBadHeader);
  }
  PageRecordHeader h;
  h.key = PageKey{LoadLe64(bytes.data() + 8), LoadLe64(bytes.data() + 16)};
  h.parent = PageKey{LoadLe64(bytes.data() + 24), LoadLe64(bytes.data() + 32)};
  h.state_bytes = LoadLe64(bytes.data() + 40);
  return h;
}

SaveSnapshot PageSnapshot(const SaveSnapshot& snapshot, size_t index) {
  SaveSnapshot page;
  page.fingerprint = snapshot.fingerprint;
  page.layout = snapshot.layout;
  page.page_size = snapshot.page_size;
  const size_t begin = index * snapshot.page_size;
  const size_t end =
      std::min<size_t>(begin + snapshot.page_size, snapshot.tokens.size());
  page.tokens.assign(snapshot.tokens.begin() + begin,
                     snapshot.tokens.begin() + end);
  page.pages = {snapshot.pages[index]};
  page.seq = snapshot.seq;
  return page;
}

StatusOr<uint64_t> WritePageRecord(const KvStorage& storage,
                                   const SaveSnapshot& page,
                                   const PageKey& key, const PageKey& parent,
                                   const SaveOptions& options,
                                   WritableFile* out) {
  if (page.pages.size() != 1 || page.tokens.empty() ||
      page.tokens.size() > page.page_size) {
    return InvalidArgumentError(
        "a page record holds 1 to page-size cells of one page: got " +
        std::to_string(page.tokens.size()) + " cells on " +
        std::to_string(page.pages.size()) + " pages of " +
        std::to_string(page.page_size));
  }
  std::string state;
  StringWritableFile state_file(&state);
  KV_RETURN_IF_ERROR(WriteSnapshot(storage, page, options, &state_file)
                         .status()
                         .WithContext("page record " + key.ToHex()));
  const auto header =
      EncodePageRecordHeader({key, parent, static_cast<uint64_t>(state.size())});
  KV_RETURN_IF_ERROR(out->Append(header));
  KV_RETURN_IF_ERROR(out->Append(std::as_bytes(std::span(state))));
  return kPageRecordHeaderBytes + state.size();
}

StatusOr<std::unique_ptr<RandomAccessFile>> OpenPageRecord(
    const RandomAccessFile& file, const PageKey& key, const PageKey& parent) {
  std::array<std::byte, kPageRecordHeaderBytes> bytes{};
  KV_ASSIGN_OR_RETURN(size_t n, file.ReadAt(0, bytes));
  KV_ASSIGN_OR_RETURN(PageRecordHeader h,
                      DecodePageRecordHeader(std::span(bytes).first(n)));
  if (h.key != key || h.parent != parent) {
    return CorruptionError("the record holds " + Describe(h.key, h.parent) +
                           "; expected " + Describe(key, parent))
        .WithReason(kReasonBadHeader);
  }
  // The header was read whole, so the file holds at least its 64 bytes.
  const uint64_t body = file.size() - kPageRecordHeaderBytes;
  if (body != h.state_bytes) {
    return CorruptionError("page record " + key.ToHex() + " carries " +
                           std::to_string(body) +
                           " state bytes; its header says " +
                           std::to_string(h.state_bytes))
        .WithReason(body < h.state_bytes ? kReasonTruncated
                                         : kReasonTrailingBytes);
  }
  return std::unique_ptr<RandomAccessFile>(
      new FileWindow(file, kPageRecordHeaderBytes, h.state_bytes));
}

}  // namespace kvault
