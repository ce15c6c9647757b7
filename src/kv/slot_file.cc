#include "kv/slot_file.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/reasons.h"
#include "kv/prefetched_file.h"
#include "kv/state_file.h"
#include "kv/state_format.h"

namespace kvault {
namespace {

constexpr uint64_t kPrefixBytes = 12;  // magic, version, payload words

void AppendLe32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t LoadLe32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<uint32_t>(p[i]) << (8 * i);
  return v;
}

Status BadTokenHeader(const std::string& what) {
  return CorruptionError("llama.cpp token header: " + what)
      .WithReason(kReasonBadHeader);
}

// Reads the packed payload `words` into *h: [marker, version, n, ids,
// media count, zero padding].
Status ParsePacked(std::span<const uint32_t> words, SlotFileHeader* h) {
  if (words.size() < 3) {
    return BadTokenHeader("packed payload of " + std::to_string(words.size()) +
                          " words, shorter than its 3-word header");
  }
  const uint64_t n = words[2];
  if (3 + n > words.size()) {
    return BadTokenHeader("packed payload lists " + std::to_string(n) +
                          " tokens but holds " +
                          std::to_string(words.size() - 3));
  }
  for (uint64_t i = 0; i < n; ++i) {
    h->tokens.push_back(static_cast<TokenId>(words[3 + i]));
  }
  const std::span<const uint32_t> rest = words.subspan(3 + n);
  if (!rest.empty() && rest[0] != 0) {
    return FailedPreconditionError(
               "llama.cpp token header: the payload holds " +
               std::to_string(rest[0]) +
               " media chunks (images or audio); kvault serves text only")
        .WithReason(kReasonBadHeader);
  }
  auto nonzero =
      std::find_if(rest.begin(), rest.end(), [](uint32_t w) { return w != 0; });
  if (nonzero != rest.end()) {
    return BadTokenHeader("word " +
                          std::to_string(3 + n + (nonzero - rest.begin())) +
                          " of the payload is " + std::to_string(*nonzero) +
                          " after the media count, expected 0 padding");
  }
  h->packed = true;
  return Status::Ok();
}

class SuffixFile final : public RandomAccessFile {
 public:
  SuffixFile(std::unique_ptr<RandomAccessFile> base, uint64_t offset)
      : base_(std::move(base)), offset_(std::min(offset, base_->size())) {}
  StatusOr<size_t> ReadAt(uint64_t offset,
                          std::span<std::byte> out) const override {
    if (offset >= size()) return size_t{0};
    return base_->ReadAt(offset_ + offset, out);
  }
  uint64_t size() const override { return base_->size() - offset_; }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  uint64_t offset_;
};

// Checks that the state behind the header lists the header's tokens. A
// state that fails its own checks is left for the restore to report.
Status CheckTokensAgree(const RandomAccessFile& state,
                        const SlotFileHeader& h) {
  StatusOr<state_internal::ValidatedFile> v =
      state_internal::ReadHeaderAndTrailer(state);
  if (!v.ok()) return Status::Ok();
  std::vector<TokenPos> table;
  uint64_t checksum = 0;
  if (!state_internal::ReadTokenTable(state, v->header, &table, &checksum)
           .ok()) {
    return Status::Ok();
  }
  if (table.size() != h.tokens.size()) {
    return BadTokenHeader("lists " + std::to_string(h.tokens.size()) +
                          " tokens, the state holds " +
                          std::to_string(table.size()));
  }
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].token != h.tokens[i]) {
      return BadTokenHeader("token " + std::to_string(i) + " is " +
                            std::to_string(h.tokens[i]) + ", the state's is " +
                            std::to_string(table[i].token));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeSlotFileHeader(std::span<const TokenPos> tokens) {
  std::string out;
  out.reserve(kPrefixBytes + 4 * (tokens.size() + 4));
  AppendLe32(kLlamaSeqMagic, &out);
  AppendLe32(kLlamaSeqVersion, &out);
  AppendLe32(static_cast<uint32_t>(tokens.size() + 4), &out);
  AppendLe32(kPackedTokensMarker, &out);
  AppendLe32(kPackedTokensVersion, &out);
  AppendLe32(static_cast<uint32_t>(tokens.size()), &out);
  for (const TokenPos& t : tokens)
    AppendLe32(static_cast<uint32_t>(t.token), &out);
  AppendLe32(0, &out);  // no media
  return out;
}

namespace {

// Checks the 12-byte prefix of a file of `size` bytes that starts with the
// magic; returns the payload's word count.
StatusOr<uint64_t> CheckPrefix(std::span<const std::byte> prefix,
                               uint64_t size) {
  if (size < kPrefixBytes) {
    return CorruptionError("truncated: file is " + std::to_string(size) +
                           " bytes, shorter than the 12-byte token header")
        .WithReason(kReasonTruncated);
  }
  const uint32_t version = LoadLe32(prefix.data() + 4);
  if (version != kLlamaSeqVersion) {
    return UnimplementedError(
               "llama.cpp sequence-state version " + std::to_string(version) +
               "; kvault reads version " + std::to_string(kLlamaSeqVersion))
        .WithReason(kReasonVersionUnsupported);
  }
  const uint64_t num_words = LoadLe32(prefix.data() + 8);
  if (num_words > kMaxTokenWords) {
    return BadTokenHeader(std::to_string(num_words) +
                          " token words, more than " +
                          std::to_string(kMaxTokenWords));
  }
  if (kPrefixBytes + 4 * num_words > size) {
    return CorruptionError("truncated: the token header's " +
                           std::to_string(num_words) + " words need " +
                           std::to_string(kPrefixBytes + 4 * num_words) +
                           " bytes, the file has " + std::to_string(size))
        .WithReason(kReasonTruncated);
  }
  return num_words;
}

}  // namespace

StatusOr<SlotFileHeader> ReadSlotFileHeader(const RandomAccessFile& file) {
  SlotFileHeader h;
  std::array<std::byte, kPrefixBytes> prefix{};
  const uint64_t size = file.size();
  if (size < 4) return h;  // too short for either: the state reader says so
  KV_RETURN_IF_ERROR(state_internal::ReadExact(
      file, 0, std::span(prefix).first(std::min<uint64_t>(size, 12)),
      "token header"));
  if (LoadLe32(prefix.data()) != kLlamaSeqMagic) return h;
  KV_ASSIGN_OR_RETURN(const uint64_t num_words, CheckPrefix(prefix, size));
  std::vector<std::byte> bytes(4 * num_words);
  KV_RETURN_IF_ERROR(
      state_internal::ReadExact(file, kPrefixBytes, bytes, "token payload"));
  std::vector<uint32_t> words(num_words);
  for (uint64_t i = 0; i < num_words; ++i) words[i] = LoadLe32(&bytes[4 * i]);
  if (!words.empty() && words[0] == kPackedTokensMarker) {
    KV_RETURN_IF_ERROR(ParsePacked(words, &h));
  } else {
    h.tokens.assign(words.begin(), words.end());
  }
  h.body_offset = kPrefixBytes + 4 * num_words;
  return h;
}

std::unique_ptr<RandomAccessFile> FileSuffix(
    std::unique_ptr<RandomAccessFile> base, uint64_t offset) {
  return std::make_unique<SuffixFile>(std::move(base), offset);
}

StatusOr<OpenedSlotFile> OpenSlotFile(Env* env, const std::string& path) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                      env->NewRandomAccessFile(path));
  KV_ASSIGN_OR_RETURN(const SlotFileHeader h, ReadSlotFileHeader(*file));
  OpenedSlotFile opened;
  opened.header_bytes = h.body_offset;
  if (h.body_offset == 0) {
    KV_ASSIGN_OR_RETURN(opened.state, PrefetchedFile::Wrap(std::move(file)));
    return opened;
  }
  std::unique_ptr<RandomAccessFile> body =
      FileSuffix(std::move(file), h.body_offset);
  std::array<std::byte, sizeof(kStateMagic)> magic{};
  StatusOr<size_t> got = body->ReadAt(0, magic);
  if (!got.ok()) return got.status();
  if (*got == magic.size() &&
      std::memcmp(magic.data(), kStateMagic, magic.size()) != 0) {
    return InvalidArgumentError(
               "a llama.cpp slot file: behind its token header (" +
               std::to_string(h.tokens.size()) +
               " tokens) is llama.cpp's own KV data, which kvault does not "
               "read; restore it in llama-server, or resend the conversation")
        .WithReason(kReasonBadMagic);
  }
  KV_ASSIGN_OR_RETURN(opened.state, PrefetchedFile::Wrap(std::move(body)));
  KV_RETURN_IF_ERROR(CheckTokensAgree(*opened.state, h));
  return opened;
}

}  // namespace kvault
