// Element types of the KV storage and their row encodings. Q8_0 is ggml's
// block layout: each block of 32 values is an fp16 scale d (little-endian)
// followed by 32 int8 quants q, value = q * d; 34 bytes per block.
#ifndef KVAULT_KV_KV_DTYPE_H_
#define KVAULT_KV_KV_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/status_or.h"

namespace kvault {

// Values are ggml type ids: they are written into state files.
enum class KvDtype : uint8_t { kF32 = 0, kF16 = 1, kQ8_0 = 8 };

inline constexpr uint32_t kQ8_0BlockElems = 32;
inline constexpr uint32_t kQ8_0BlockBytes = 2 + kQ8_0BlockElems;  // d + qs

// Returns "f32", "f16", "q8_0", or "unknown" for an unsupported value.
std::string_view DtypeName(KvDtype dtype);
// Parses "f32" / "f16" / "q8_0" (as DtypeName prints them).
StatusOr<KvDtype> ParseDtype(std::string_view name);
// Converts a stored ggml type id, rejecting ids kv does not support.
StatusOr<KvDtype> DtypeFromId(uint32_t id);
// Returns true for the three supported dtypes.
bool IsSupportedDtype(KvDtype dtype);

// Returns how many values one encoding unit holds (1, or 32 for Q8_0); a
// row's element count must be a multiple of it.
uint32_t DtypeBlockElems(KvDtype dtype);
// Returns the bytes `num_elems` values take; num_elems must be a multiple of
// DtypeBlockElems(dtype).
uint64_t DtypeRowBytes(KvDtype dtype, uint64_t num_elems);

// Encodes `src` into `dst` (dst.size() == DtypeRowBytes(dtype, src.size())).
// Q8_0 expects finite inputs.
void EncodeRow(KvDtype dtype, std::span<const float> src,
               std::span<std::byte> dst);
// Decodes `src` into `dst` (src.size() == DtypeRowBytes(dtype, dst.size())).
void DecodeRow(KvDtype dtype, std::span<const std::byte> src,
               std::span<float> dst);

// Quantizes to Q8_0 blocks as ggml does: d = max|x| / 127 (stored as fp16),
// q = round(x * (1 / d)) half away from zero, using the unrounded d; an
// all-zero block gets d = 0 and q = 0.
void QuantizeRowQ8_0(std::span<const float> src, std::span<std::byte> dst);
// Dequantizes Q8_0 blocks: x = q * d.
void DequantizeRowQ8_0(std::span<const std::byte> src, std::span<float> dst);

}  // namespace kvault

#endif  // KVAULT_KV_KV_DTYPE_H_
