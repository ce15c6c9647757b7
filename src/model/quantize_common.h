// Helpers shared by the row quantizers (quantize_*.cc); not a public API.
#ifndef KVAULT_MODEL_QUANTIZE_COMMON_H_
#define KVAULT_MODEL_QUANTIZE_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/check.h"
#include "core/float16.h"

namespace kvault::quant_internal {

// Rounds to the nearest integer, ties to even, for |v| <= 4194303, the way
// ggml's nearest_int does (adding 1.5 * 2^23 puts the integer in the low
// mantissa bits).
inline int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Stores `v` as f16 (round to nearest even) at `dst`.
inline void StoreHalf(float v, std::byte* dst) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(dst, &h, 2);
}

// Returns the float value of the f16 at `src`.
inline float LoadHalf(const std::byte* src) {
  uint16_t h;
  std::memcpy(&h, src, 2);
  return HalfToFloat(h);
}

// Returns the float value of the f16 that `v` rounds to.
inline float RoundTripHalf(float v) { return HalfToFloat(FloatToHalf(v)); }

// Checks that `dst` holds exactly the blocks of `src`.
inline size_t CheckBlocks(std::span<const float> src, size_t dst_bytes,
                          size_t block_elems, size_t block_bytes) {
  KV_CHECK(src.size() % block_elems == 0 &&
           src.size() / block_elems * block_bytes == dst_bytes)
      << src.size() << " values vs " << dst_bytes << " bytes";
  return src.size() / block_elems;
}

inline constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

}  // namespace kvault::quant_internal

#endif  // KVAULT_MODEL_QUANTIZE_COMMON_H_
