// PageKey: the content address of one full page of KV in the prefix cache
// (docs/distributed.md). The K/V of a page depends on the model, on the
// cache's layout and on every token before it, so a key is a hash chain:
//
//   root      = XXH3-128("kvault-prefix-v1", model fingerprint, layout
//               (layers, KV heads, K/V head sizes, dtype), page size,
//               config)
//   key(page) = XXH3-128(parent key, the page's (token id, pos) cells)
//
// where the parent of a sequence's first page is the root and `config` is
// whatever else shapes the K/V values (the engine passes a hash of its RoPE
// settings). Two pages have the same key only when everything they depend
// on is the same (up to a 128-bit collision); a model, layout or RoPE
// change gives every key a different root, so no store ever serves another
// model's pages.
#ifndef KVAULT_KV_PAGE_KEY_H_
#define KVAULT_KV_PAGE_KEY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_layout.h"
#include "kv/kv_types.h"
#include "kv/model_fingerprint.h"

namespace kvault {

struct PageKey {
  uint64_t lo = 0;
  uint64_t hi = 0;
  // Returns 32 lowercase hex digits, high half first.
  std::string ToHex() const;
  // Parses ToHex()'s form; nullopt for anything else.
  static std::optional<PageKey> FromHex(std::string_view hex);
  friend bool operator==(const PageKey&, const PageKey&) = default;
  friend auto operator<=>(const PageKey&, const PageKey&) = default;
};

// For unordered containers (the key is already a uniform hash).
struct PageKeyHash {
  size_t operator()(const PageKey& key) const { return key.lo; }
};

// Returns the root of every chain for this model, layout, page size and
// `config` (see the file comment).
PageKey ChainRoot(const ModelFingerprint& fingerprint, const KvLayout& layout,
                  uint32_t page_size, uint64_t config);

// Returns the key of the page holding `cells` after the page keyed
// `parent` (the root for a first page).
PageKey NextPageKey(const PageKey& parent, std::span<const TokenPos> cells);

// Returns the key of the tail record after the page keyed `parent`: the
// cells of a partly filled last page. It hashes the parent with no cells,
// so it never equals a full page's key; one tail per parent is kept (the
// first published), and a reader uses as much of it as matches its prompt.
inline PageKey TailKey(const PageKey& parent) {
  return NextPageKey(parent, {});
}

// Returns the keys of the full pages of a sequence holding `cells`, in
// order: page i covers cells [i * page_size, (i + 1) * page_size); a partly
// filled last page has no key.
std::vector<PageKey> PageKeyChain(const PageKey& root,
                                  std::span<const TokenPos> cells,
                                  uint32_t page_size);

}  // namespace kvault

#endif  // KVAULT_KV_PAGE_KEY_H_
