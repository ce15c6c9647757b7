#include "kv/state_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/check.h"
#include "core/checksum.h"

namespace kvault {
namespace {

// Byte offsets of the header fields (docs/state_file_format.md, "Header").
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderBytes = 12;
constexpr size_t kOffProducer = 16;
constexpr size_t kOffFingerprintLo = 48;
constexpr size_t kOffFingerprintHi = 56;
constexpr size_t kOffNumLayers = 64;
constexpr size_t kOffNumKvHeads = 68;
constexpr size_t kOffHeadDimK = 72;
constexpr size_t kOffHeadDimV = 76;
constexpr size_t kOffDtype = 80;
constexpr size_t kOffTokensPerChunk = 84;
constexpr size_t kOffNumTokens = 88;
constexpr size_t kOffReserved = 96;
constexpr size_t kReservedBytes = 24;
constexpr size_t kOffHeaderChecksum = 120;

// Offsets inside the trailer.
constexpr size_t kOffTrailerFileBytes = 0;
constexpr size_t kOffTrailerSummary = 8;
constexpr size_t kOffTrailerMagic = 16;

void StoreLe32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

uint32_t LoadLe32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t{std::to_integer<uint8_t>(p[i])} << (8 * i);
  }
  return v;
}

// Renders bytes as a quoted string with \xNN escapes, for magic mismatches.
std::string Quoted(std::span<const std::byte> bytes) {
  std::string out = "\"";
  for (std::byte b : bytes) {
    const auto c = std::to_integer<unsigned char>(b);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

Status BadHeader(std::string message) {
  return CorruptionError("bad header: " + message).WithReason(kReasonBadHeader);
}

Status CheckField(std::string_view name, size_t offset, uint64_t value,
                  uint64_t min, uint64_t max) {
  if (value >= min && value <= max) return Status::Ok();
  return BadHeader(std::string(name) + " (offset " + std::to_string(offset) +
                   ") is " + std::to_string(value) + ", expected " +
                   std::to_string(min) + ".." + std::to_string(max));
}

Status CheckProducer(const std::string& producer) {
  if (producer.size() > kStateProducerBytes) {
    return BadHeader("producer (offset 16) is " +
                     std::to_string(producer.size()) + " bytes, at most " +
                     std::to_string(kStateProducerBytes));
  }
  for (size_t i = 0; i < producer.size(); ++i) {
    const auto c = static_cast<unsigned char>(producer[i]);
    if (c < 0x20 || c >= 0x7F) {
      return BadHeader("producer byte at offset " +
                       std::to_string(kOffProducer + i) + " is " +
                       std::to_string(c) + ", expected printable ASCII");
    }
  }
  return Status::Ok();
}

// Sets *out = a * b + c; false when that overflows u64.
bool MulAdd(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return false;
  return !__builtin_add_overflow(product, c, out);
}

// file_bytes with overflow checks; false when it does not fit in u64.
bool CheckedFileBytes(const StateHeader& h, uint64_t* out) {
  const uint64_t cell_bytes = h.layout.cell_bytes();
  uint64_t bytes = kStateHeaderBytes + kStateChecksumBytes + kStateTrailerBytes;
  return MulAdd(h.num_tokens, kStateTokenRecordBytes, bytes, &bytes) &&
         MulAdd(h.num_tokens, cell_bytes, bytes, &bytes) &&
         MulAdd(h.num_chunks(), kStateChecksumBytes, bytes, out);
}

std::string LayoutDims(const KvLayout& l) {
  return std::to_string(l.num_layers) + " layers x " +
         std::to_string(l.num_kv_heads) + " KV heads x head dims " +
         std::to_string(l.head_dim_k) + "/" + std::to_string(l.head_dim_v);
}

// Parses the producer field: printable bytes up to the NUL padding.
std::string DecodeProducer(const std::byte* p) {
  size_t n = 0;
  while (n < kStateProducerBytes && p[n] != std::byte{0}) ++n;
  return std::string(reinterpret_cast<const char*>(p), n);
}

// Check 5 on the raw bytes: what a StateHeader cannot represent.
Status CheckRawFields(const std::byte* b) {
  const uint32_t header_bytes = LoadLe32(b + kOffHeaderBytes);
  if (header_bytes != kStateHeaderBytes) {
    return BadHeader("header_bytes (offset 12) is " +
                     std::to_string(header_bytes) + ", expected 128");
  }
  for (size_t i = DecodeProducer(b + kOffProducer).size();
       i < kStateProducerBytes; ++i) {
    if (b[kOffProducer + i] != std::byte{0}) {
      return BadHeader("producer padding byte at offset " +
                       std::to_string(kOffProducer + i) + " is not NUL");
    }
  }
  for (size_t i = 0; i < kReservedBytes; ++i) {
    if (b[kOffReserved + i] != std::byte{0}) {
      return BadHeader(
          "reserved byte at offset " + std::to_string(kOffReserved + i) +
          " is " + std::to_string(std::to_integer<int>(b[kOffReserved + i])) +
          ", expected 0");
    }
  }
  const uint32_t dtype_id = LoadLe32(b + kOffDtype);
  if (!DtypeFromId(dtype_id).ok()) {
    return BadHeader("dtype (offset 80) is " + std::to_string(dtype_id) +
                     ", expected 0 (f32), 1 (f16) or 8 (q8_0)");
  }
  return Status::Ok();
}

}  // namespace

std::string Hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

uint64_t StateHeader::num_chunks() const {
  if (tokens_per_chunk == 0) return 0;
  return num_tokens / tokens_per_chunk +
         (num_tokens % tokens_per_chunk != 0 ? 1 : 0);
}

uint64_t StateHeader::chunk_tokens(uint64_t c) const {
  KV_CHECK_LT(c, num_chunks());
  const uint64_t first = c * tokens_per_chunk;
  return std::min<uint64_t>(tokens_per_chunk, num_tokens - first);
}

uint64_t StateHeader::chunk_offset(uint64_t c) const {
  const uint64_t full_chunk_bytes =
      uint64_t{tokens_per_chunk} * layout.cell_bytes() + kStateChecksumBytes;
  return kStateHeaderBytes + num_tokens * kStateTokenRecordBytes +
         kStateChecksumBytes + c * full_chunk_bytes;
}

uint64_t StateHeader::file_bytes() const {
  return kStateHeaderBytes + num_tokens * kStateTokenRecordBytes +
         kStateChecksumBytes + num_tokens * layout.cell_bytes() +
         num_chunks() * kStateChecksumBytes + kStateTrailerBytes;
}

uint32_t ChooseTokensPerChunk(const KvLayout& layout,
                              uint64_t target_chunk_bytes) {
  const uint64_t cell_bytes = layout.cell_bytes();
  const uint64_t tokens = cell_bytes == 0 ? 1 : target_chunk_bytes / cell_bytes;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(tokens, 1, kStateMaxTokensPerChunk));
}

Status ValidateHeaderFields(const StateHeader& h) {
  KV_RETURN_IF_ERROR(CheckProducer(h.producer));
  const KvLayout& l = h.layout;
  KV_RETURN_IF_ERROR(CheckField("num_layers", kOffNumLayers, l.num_layers, 1,
                                KvLayout::kMaxLayers));
  KV_RETURN_IF_ERROR(CheckField("num_kv_heads", kOffNumKvHeads, l.num_kv_heads,
                                1, KvLayout::kMaxKvHeads));
  KV_RETURN_IF_ERROR(CheckField("head_dim_k", kOffHeadDimK, l.head_dim_k, 1,
                                KvLayout::kMaxHeadDim));
  KV_RETURN_IF_ERROR(CheckField("head_dim_v", kOffHeadDimV, l.head_dim_v, 1,
                                KvLayout::kMaxHeadDim));
  if (!IsSupportedDtype(l.dtype)) {
    return BadHeader("dtype (offset 80) is " +
                     std::to_string(static_cast<int>(l.dtype)) +
                     ", expected 0 (f32), 1 (f16) or 8 (q8_0)");
  }
  if (l.k_row_elems() > KvLayout::kMaxRowElems ||
      l.v_row_elems() > KvLayout::kMaxRowElems) {
    return BadHeader("a row holds at most 2^20 values, K row has " +
                     std::to_string(l.k_row_elems()) + ", V row has " +
                     std::to_string(l.v_row_elems()) +
                     " (num_kv_heads x head_dim at offsets 68-79)");
  }
  const uint32_t block = DtypeBlockElems(l.dtype);
  if (l.k_row_elems() % block != 0 || l.v_row_elems() % block != 0) {
    return BadHeader(std::string(DtypeName(l.dtype)) +
                     " rows need multiples of " + std::to_string(block) +
                     " values, K row has " + std::to_string(l.k_row_elems()) +
                     ", V row has " + std::to_string(l.v_row_elems()));
  }
  KV_RETURN_IF_ERROR(CheckField("tokens_per_chunk", kOffTokensPerChunk,
                                h.tokens_per_chunk, 1,
                                kStateMaxTokensPerChunk));
  KV_RETURN_IF_ERROR(CheckField("num_tokens", kOffNumTokens, h.num_tokens, 0,
                                kStateMaxTokens));
  uint64_t file_bytes = 0;
  if (!CheckedFileBytes(h, &file_bytes) || file_bytes > kStateMaxFileBytes) {
    return BadHeader("header implies a file of more than 2^62 bytes (" +
                     std::to_string(h.num_tokens) + " tokens x " +
                     std::to_string(l.cell_bytes()) + " bytes per cell)");
  }
  return Status::Ok();
}

std::array<std::byte, kStateHeaderBytes> EncodeHeader(const StateHeader& h) {
  KV_CHECK_OK(ValidateHeaderFields(h));
  std::array<std::byte, kStateHeaderBytes> b{};
  std::memcpy(b.data() + kOffMagic, kStateMagic, sizeof(kStateMagic));
  StoreLe32(b.data() + kOffVersion, h.format_version);
  StoreLe32(b.data() + kOffHeaderBytes, kStateHeaderBytes);
  std::memcpy(b.data() + kOffProducer, h.producer.data(), h.producer.size());
  StoreLe64(b.data() + kOffFingerprintLo, h.fingerprint.lo);
  StoreLe64(b.data() + kOffFingerprintHi, h.fingerprint.hi);
  StoreLe32(b.data() + kOffNumLayers, h.layout.num_layers);
  StoreLe32(b.data() + kOffNumKvHeads, h.layout.num_kv_heads);
  StoreLe32(b.data() + kOffHeadDimK, h.layout.head_dim_k);
  StoreLe32(b.data() + kOffHeadDimV, h.layout.head_dim_v);
  StoreLe32(b.data() + kOffDtype, static_cast<uint32_t>(h.layout.dtype));
  StoreLe32(b.data() + kOffTokensPerChunk, h.tokens_per_chunk);
  StoreLe64(b.data() + kOffNumTokens, h.num_tokens);
  StoreLe64(b.data() + kOffHeaderChecksum,
            Xxh3_64(b.data(), kOffHeaderChecksum));
  return b;
}

StatusOr<StateHeader> DecodeHeader(std::span<const std::byte> bytes) {
  if (bytes.size() < kStateHeaderBytes) {
    return CorruptionError("header is " + std::to_string(bytes.size()) +
                           " bytes, expected 128")
        .WithReason(kReasonTruncated);
  }
  const std::byte* b = bytes.data();
  if (std::memcmp(b + kOffMagic, kStateMagic, sizeof(kStateMagic)) != 0) {
    return CorruptionError("not a kvault state file: bytes [0, 8) are " +
                           Quoted(bytes.first(8)) + ", expected \"KVAULTKV\"")
        .WithReason(kReasonBadMagic);
  }
  const uint64_t stored = LoadLe64(b + kOffHeaderChecksum);
  const uint64_t computed = Xxh3_64(b, kOffHeaderChecksum);
  if (stored != computed) {
    return CorruptionError(
               "header checksum mismatch (bytes [0, 120), stored "
               "at offset 120): stored " +
               Hex64(stored) + ", computed " + Hex64(computed))
        .WithReason(kReasonChecksumMismatch);
  }
  const uint32_t version = LoadLe32(b + kOffVersion);
  if (version != kStateFormatVersion) {
    return UnimplementedError("state file version " + std::to_string(version) +
                              " not supported; this build reads version 1")
        .WithReason(kReasonVersionUnsupported);
  }
  KV_RETURN_IF_ERROR(CheckRawFields(b));
  StateHeader h;
  h.format_version = version;
  h.producer = DecodeProducer(b + kOffProducer);
  h.fingerprint.lo = LoadLe64(b + kOffFingerprintLo);
  h.fingerprint.hi = LoadLe64(b + kOffFingerprintHi);
  h.layout.num_layers = LoadLe32(b + kOffNumLayers);
  h.layout.num_kv_heads = LoadLe32(b + kOffNumKvHeads);
  h.layout.head_dim_k = LoadLe32(b + kOffHeadDimK);
  h.layout.head_dim_v = LoadLe32(b + kOffHeadDimV);
  h.layout.dtype = static_cast<KvDtype>(LoadLe32(b + kOffDtype));
  h.tokens_per_chunk = LoadLe32(b + kOffTokensPerChunk);
  h.num_tokens = LoadLe64(b + kOffNumTokens);
  KV_RETURN_IF_ERROR(ValidateHeaderFields(h));
  return h;
}

Status CheckCompatible(const StateHeader& h, const KvLayout& layout,
                       const ModelFingerprint& fingerprint) {
  if (h.fingerprint != fingerprint) {
    return FailedPreconditionError("model fingerprint: file has " +
                                   h.fingerprint.ToHex() +
                                   ", loaded model has " + fingerprint.ToHex())
        .WithReason(kReasonModelMismatch);
  }
  const KvLayout& f = h.layout;
  if (f.num_layers != layout.num_layers ||
      f.num_kv_heads != layout.num_kv_heads ||
      f.head_dim_k != layout.head_dim_k || f.head_dim_v != layout.head_dim_v) {
    return FailedPreconditionError("layout: file has " + LayoutDims(f) +
                                   ", cache has " + LayoutDims(layout))
        .WithReason(kReasonLayoutMismatch);
  }
  if (f.dtype != layout.dtype) {
    return FailedPreconditionError(
               "element type: file has " + std::string(DtypeName(f.dtype)) +
               ", cache has " + std::string(DtypeName(layout.dtype)))
        .WithReason(kReasonDtypeMismatch);
  }
  return Status::Ok();
}

std::array<std::byte, kStateTrailerBytes> EncodeTrailer(const StateTrailer& t) {
  std::array<std::byte, kStateTrailerBytes> b{};
  StoreLe64(b.data() + kOffTrailerFileBytes, t.file_bytes);
  StoreLe64(b.data() + kOffTrailerSummary, t.summary_checksum);
  std::memcpy(b.data() + kOffTrailerMagic, kStateEndMagic,
              sizeof(kStateEndMagic));
  return b;
}

StatusOr<StateTrailer> DecodeTrailer(std::span<const std::byte> bytes,
                                     uint64_t expected_file_bytes) {
  const std::string where =
      "trailer at offset " +
      std::to_string(expected_file_bytes - kStateTrailerBytes);
  if (bytes.size() != kStateTrailerBytes) {
    return CorruptionError(where + " is " + std::to_string(bytes.size()) +
                           " bytes, expected 24")
        .WithReason(kReasonBadTrailer);
  }
  const std::byte* b = bytes.data();
  if (std::memcmp(b + kOffTrailerMagic, kStateEndMagic,
                  sizeof(kStateEndMagic)) != 0) {
    return CorruptionError(where + ": end magic is " +
                           Quoted(bytes.subspan(kOffTrailerMagic, 8)) +
                           ", expected \"KVAULTND\"")
        .WithReason(kReasonBadTrailer);
  }
  StateTrailer t;
  t.file_bytes = LoadLe64(b + kOffTrailerFileBytes);
  t.summary_checksum = LoadLe64(b + kOffTrailerSummary);
  if (t.file_bytes != expected_file_bytes) {
    return CorruptionError(where + ": file_bytes is " +
                           std::to_string(t.file_bytes) + ", header implies " +
                           std::to_string(expected_file_bytes))
        .WithReason(kReasonBadTrailer);
  }
  return t;
}

void EncodeTokenRecords(std::span<const TokenPos> tokens,
                        std::span<std::byte> out) {
  KV_CHECK_EQ(out.size(), tokens.size() * kStateTokenRecordBytes);
  std::byte* p = out.data();
  for (const TokenPos& t : tokens) {
    StoreLe32(p, static_cast<uint32_t>(t.token));
    StoreLe32(p + 4, static_cast<uint32_t>(t.pos));
    p += kStateTokenRecordBytes;
  }
}

void DecodeTokenRecords(std::span<const std::byte> records,
                        std::span<TokenPos> out) {
  KV_CHECK_EQ(records.size(), out.size() * kStateTokenRecordBytes);
  const std::byte* p = records.data();
  for (TokenPos& t : out) {
    t.token = static_cast<TokenId>(LoadLe32(p));
    t.pos = static_cast<Pos>(LoadLe32(p + 4));
    p += kStateTokenRecordBytes;
  }
}

uint64_t ChunkChecksum(std::span<const std::byte> payload, uint64_t c) {
  return Xxh3_64WithSeed(payload.data(), payload.size(), ChunkChecksumSeed(c));
}

uint64_t SummaryChecksum(uint64_t header_checksum, uint64_t token_checksum,
                         std::span<const uint64_t> chunk_checksums) {
  Xxh3Hasher hasher;
  auto add = [&hasher](uint64_t checksum) {
    std::byte le[8];
    StoreLe64(le, checksum);
    hasher.Update(le, sizeof(le));
  };
  add(header_checksum);
  add(token_checksum);
  for (uint64_t checksum : chunk_checksums) add(checksum);
  return hasher.Digest();
}

}  // namespace kvault
