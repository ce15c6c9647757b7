#include "model/ggml_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string>

#include "core/check.h"

namespace kvault {
namespace {

// Block layouts are facts of ggml's formats (ggml-common.h): 32-element
// blocks for the legacy quants, 256-element super-blocks (QK_K) for the
// k-quants, IQ and TQ types. Only the types with kvault kernels are marked
// supported: plain floats (f32, f16, bf16), the legacy quants, the
// K-quants Q2_K..Q6_K and the two 4-bit non-linear IQ types.
constexpr std::array<GgmlTypeInfo, 32> kTypes = {{
    {GgmlType::kF32, "f32", 1, 4, true},
    {GgmlType::kF16, "f16", 1, 2, true},
    {GgmlType::kQ4_0, "q4_0", 32, 18, true},     // f16 d + 16 nibble bytes
    {GgmlType::kQ4_1, "q4_1", 32, 20, true},     // f16 d, m + 16
    {GgmlType::kQ5_0, "q5_0", 32, 22, true},     // f16 d + 4 qh + 16
    {GgmlType::kQ5_1, "q5_1", 32, 24, true},     // f16 d, m + 4 + 16
    {GgmlType::kQ8_0, "q8_0", 32, 34, true},     // f16 d + 32 int8
    {GgmlType::kQ8_1, "q8_1", 32, 36, false},    // f16 d, s + 32 int8
    {GgmlType::kQ2_K, "q2_K", 256, 84, true},    // 16 + 64 + 2 f16
    {GgmlType::kQ3_K, "q3_K", 256, 110, true},   // 32 + 64 + 12 + f16
    {GgmlType::kQ4_K, "q4_K", 256, 144, true},   // 2 f16 + 12 + 128
    {GgmlType::kQ5_K, "q5_K", 256, 176, true},   // 2 f16 + 12 + 32 + 128
    {GgmlType::kQ6_K, "q6_K", 256, 210, true},   // 128 + 64 + 16 + f16
    {GgmlType::kQ8_K, "q8_K", 256, 292, false},  // f32 d + 256 + 16 i16
    {GgmlType::kIQ2_XXS, "iq2_xxs", 256, 66, false},
    {GgmlType::kIQ2_XS, "iq2_xs", 256, 74, false},
    {GgmlType::kIQ3_XXS, "iq3_xxs", 256, 98, false},
    {GgmlType::kIQ1_S, "iq1_s", 256, 50, false},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {GgmlType::kIQ3_S, "iq3_s", 256, 110, false},
    {GgmlType::kIQ2_S, "iq2_s", 256, 82, false},
    {GgmlType::kIQ4_XS, "iq4_xs", 256, 136, true},
    {GgmlType::kI8, "i8", 1, 1, false},
    {GgmlType::kI16, "i16", 1, 2, false},
    {GgmlType::kI32, "i32", 1, 4, false},
    {GgmlType::kI64, "i64", 1, 8, false},
    {GgmlType::kF64, "f64", 1, 8, false},
    {GgmlType::kIQ1_M, "iq1_m", 256, 56, false},
    {GgmlType::kBF16, "bf16", 1, 2, true},
    {GgmlType::kTQ1_0, "tq1_0", 256, 54, false},
    {GgmlType::kTQ2_0, "tq2_0", 256, 66, false},
    {GgmlType::kMXFP4, "mxfp4", 32, 17, false},  // e8m0 scale + 16 bytes
}};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return &info;
  }
  return nullptr;
}

const GgmlTypeInfo& GetGgmlTypeInfo(GgmlType type) {
  const GgmlTypeInfo* info = FindGgmlType(static_cast<uint32_t>(type));
  KV_CHECK(info != nullptr)
      << "not a GgmlType enumerator: " << static_cast<uint32_t>(type);
  return *info;
}

std::span<const GgmlTypeInfo> AllGgmlTypes() { return kTypes; }

std::string_view GgmlTypeName(GgmlType type) {
  return GetGgmlTypeInfo(type).name;
}

StatusOr<GgmlType> ParseGgmlType(std::string_view name) {
  const std::string lower = Lower(name);
  for (const GgmlTypeInfo& info : kTypes) {
    if (Lower(info.name) == lower) return info.type;
  }
  return InvalidArgumentError("unknown ggml type name '" + std::string(name) +
                              "'");
}

StatusOr<uint64_t> GgmlRowBytes(GgmlType type, uint64_t num_elements) {
  const GgmlTypeInfo& info = GetGgmlTypeInfo(type);
  if (num_elements % info.block_size != 0) {
    return InvalidArgumentError(std::to_string(num_elements) +
                                " elements of type " + std::string(info.name) +
                                " are not a multiple of its block size " +
                                std::to_string(info.block_size));
  }
  const uint64_t num_blocks = num_elements / info.block_size;
  if (num_blocks >
      std::numeric_limits<uint64_t>::max() / info.bytes_per_block) {
    return InvalidArgumentError("byte size of " + std::to_string(num_elements) +
                                " elements of type " + std::string(info.name) +
                                " overflows");
  }
  return num_blocks * info.bytes_per_block;
}

Status CheckGgmlTypeSupported(GgmlType type) {
  const GgmlTypeInfo& info = GetGgmlTypeInfo(type);
  if (info.supported_for_compute) return Status::Ok();
  return UnimplementedError("tensor type " + std::string(info.name) +
                            " is not supported");
}

}  // namespace kvault
