#include "core/checksum.h"

#include <xxhash.h>
#if defined(__x86_64__)
// Debian's libxxhash is built for baseline SSE2; its *_dispatch entry points
// pick AVX2/AVX-512 at run time (about 3x faster here). The header renames
// the XXH3_64bits* calls below to them.
#include <xxh_x86dispatch.h>
#endif

#include "core/check.h"

namespace kvault {

uint64_t Xxh3_64(std::span<const std::byte> data) {
  return XXH3_64bits(data.data(), data.size());
}

uint64_t Xxh3_64(const void* data, size_t num_bytes) {
  return XXH3_64bits(data, num_bytes);
}

uint64_t Xxh3_64WithSeed(const void* data, size_t num_bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(data, num_bytes, seed);
}

Hash128 Xxh3_128(const void* data, size_t num_bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, num_bytes);
  return Hash128{h.low64, h.high64};
}

Xxh3Hasher::Xxh3Hasher() : state_(XXH3_createState()) {
  KV_CHECK(state_ != nullptr) << "XXH3_createState failed";
  Reset();
}

Xxh3Hasher::~Xxh3Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Hasher::Update(const void* data, size_t num_bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, num_bytes);
}

uint64_t Xxh3Hasher::Digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

void Xxh3Hasher::Reset(uint64_t seed) {
  XXH3_64bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}

}  // namespace kvault
