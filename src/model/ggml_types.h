// ggml tensor element types as GGUF files store them: the numeric ids of
// ggml.h's `enum ggml_type`, each type's name, block size (elements per
// block) and bytes per block, and whether kvault can compute with it. Types
// that ggml removed (ids 4, 5, 31-33, 36-38) are unknown here, so a file that
// uses one is refused as "unknown type" rather than misread.
#ifndef KVAULT_MODEL_GGML_TYPES_H_
#define KVAULT_MODEL_GGML_TYPES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status_or.h"

namespace kvault {

// The values are ggml's on-disk ids (a fact of the GGUF format).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

// One row of the type table.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;       // ggml's name, e.g. "q8_0"
  uint32_t block_size;         // elements per block (1 for plain types)
  uint32_t bytes_per_block;    // bytes of one block
  bool supported_for_compute;  // kvault has kernels for it
};

// Returns the table row of a known type id, or null for an unknown id.
const GgmlTypeInfo* FindGgmlType(uint32_t id);
// Returns the row of `type` (which is always a known enumerator).
const GgmlTypeInfo& GetGgmlTypeInfo(GgmlType type);
// Returns every known type, ordered by id.
std::span<const GgmlTypeInfo> AllGgmlTypes();
// Returns ggml's name of `type`, e.g. "f32", "q4_0".
std::string_view GgmlTypeName(GgmlType type);
// Parses a ggml type name (case-insensitive); InvalidArgument when unknown.
StatusOr<GgmlType> ParseGgmlType(std::string_view name);
// Returns the bytes of a row of `num_elements` elements of `type`;
// InvalidArgument when num_elements is not a multiple of the block size or
// the byte count overflows uint64.
StatusOr<uint64_t> GgmlRowBytes(GgmlType type, uint64_t num_elements);
// Returns OK when kvault can compute with `type`, else Unimplemented naming
// the type ("tensor type iq2_xs is not supported").
Status CheckGgmlTypeSupported(GgmlType type);

}  // namespace kvault

#endif  // KVAULT_MODEL_GGML_TYPES_H_
