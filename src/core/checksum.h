// XXH3 checksums (libxxhash) used by every on-disk record in kvault.
#ifndef KVAULT_CORE_CHECKSUM_H_
#define KVAULT_CORE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvault {

// Returns the 64-bit XXH3 hash of `data` (seed 0).
uint64_t Xxh3_64(std::span<const std::byte> data);
// Returns the 64-bit XXH3 hash of `num_bytes` bytes at `data`.
uint64_t Xxh3_64(const void* data, size_t num_bytes);

// Returns the 64-bit XXH3 hash of `num_bytes` bytes at `data` with `seed`.
uint64_t Xxh3_64WithSeed(const void* data, size_t num_bytes, uint64_t seed);

// A 128-bit XXH3 hash, low and high halves.
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
};
// Returns the 128-bit XXH3 hash (XXH3_128bits, seed 0) of `num_bytes`
// bytes at `data`.
Hash128 Xxh3_128(const void* data, size_t num_bytes);

// Streaming XXH3-64: Update() any number of times, then Digest(); equals
// Xxh3_64 over the concatenation.
class Xxh3Hasher {
 public:
  Xxh3Hasher();
  ~Xxh3Hasher();
  Xxh3Hasher(const Xxh3Hasher&) = delete;
  Xxh3Hasher& operator=(const Xxh3Hasher&) = delete;

  // Adds `num_bytes` bytes at `data` to the hash.
  void Update(const void* data, size_t num_bytes);
  // Returns the hash of everything added so far (does not reset).
  uint64_t Digest() const;
  // Forgets everything added; the next hash is XXH3-64 with `seed`.
  void Reset(uint64_t seed = 0);

 private:
  void* state_;  // XXH3_state_t*, kept opaque so xxhash.h stays private.
};

}  // namespace kvault

#endif  // KVAULT_CORE_CHECKSUM_H_
