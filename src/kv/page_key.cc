#include "kv/page_key.h"

#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/checksum.h"

namespace kvault {
namespace {

constexpr std::string_view kRootTag = "kvault-prefix-v1";

void PutU64(std::vector<std::byte>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
  }
}

void PutU32(std::vector<std::byte>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
  }
}

PageKey HashOf(const std::vector<std::byte>& bytes) {
  const Hash128 h = Xxh3_128(bytes.data(), bytes.size());
  return PageKey{h.lo, h.hi};
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string PageKey::ToHex() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

std::optional<PageKey> PageKey::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  uint64_t halves[2] = {0, 0};  // hi, lo
  for (size_t i = 0; i < 32; ++i) {
    const int d = HexDigit(hex[i]);
    if (d < 0) return std::nullopt;
    halves[i / 16] = (halves[i / 16] << 4) | static_cast<uint64_t>(d);
  }
  return PageKey{halves[1], halves[0]};
}

PageKey ChainRoot(const ModelFingerprint& fingerprint, const KvLayout& layout,
                  uint32_t page_size, uint64_t config) {
  std::vector<std::byte> bytes;
  for (char c : kRootTag) bytes.push_back(static_cast<std::byte>(c));
  PutU64(&bytes, fingerprint.lo);
  PutU64(&bytes, fingerprint.hi);
  PutU32(&bytes, layout.num_layers);
  PutU32(&bytes, layout.num_kv_heads);
  PutU32(&bytes, layout.head_dim_k);
  PutU32(&bytes, layout.head_dim_v);
  PutU32(&bytes, static_cast<uint32_t>(layout.dtype));
  PutU32(&bytes, page_size);
  PutU64(&bytes, config);
  return HashOf(bytes);
}

PageKey NextPageKey(const PageKey& parent, std::span<const TokenPos> cells) {
  std::vector<std::byte> bytes;
  bytes.reserve(16 + 8 * cells.size());
  PutU64(&bytes, parent.lo);
  PutU64(&bytes, parent.hi);
  for (const TokenPos& c : cells) {
    PutU32(&bytes, static_cast<uint32_t>(c.token));
    PutU32(&bytes, static_cast<uint32_t>(c.pos));
  }
  return HashOf(bytes);
}

std::vector<PageKey> PageKeyChain(const PageKey& root,
                                  std::span<const TokenPos> cells,
                                  uint32_t page_size) {
  std::vector<PageKey> keys;
  if (page_size == 0) return keys;
  keys.reserve(cells.size() / page_size);
  PageKey parent = root;
  for (size_t begin = 0; begin + page_size <= cells.size();
       begin += page_size) {
    parent = NextPageKey(parent, cells.subspan(begin, page_size));
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace kvault
