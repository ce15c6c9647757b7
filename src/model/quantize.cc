#include "model/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/float16.h"
#include "model/dequantize.h"
#include "model/quantize_rows.h"

namespace kvault {
namespace {

void StoreHalf(float v, std::byte* dst) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(dst, &h, 2);
}

float LoadHalf(const std::byte* src) {
  uint16_t h;
  std::memcpy(&h, src, 2);
  return HalfToFloat(h);
}

void CheckSizes(std::span<const float> values, size_t num_bytes,
                size_t block_elements, size_t block_bytes) {
  KV_CHECK(values.size() % block_elements == 0 &&
           values.size() / block_elements * block_bytes == num_bytes)
      << values.size() << " values vs " << num_bytes << " bytes";
}

}  // namespace

void QuantizeRowQ4_0(std::span<const float> src, std::span<std::byte> dst) {
  CheckSizes(src, dst.size(), kQ4_0BlockElems, kQ4_0BlockBytes);
  constexpr size_t kHalf = kQ4_0BlockElems / 2;
  for (size_t b = 0; b < src.size() / kQ4_0BlockElems; ++b) {
    const float* x = src.data() + b * kQ4_0BlockElems;
    std::byte* y = dst.data() + b * kQ4_0BlockBytes;
    float amax = 0.0f;
    float max = 0.0f;  // the value of largest magnitude, sign kept
    for (size_t j = 0; j < kQ4_0BlockElems; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(d, y);
    for (size_t j = 0; j < kHalf; ++j) {
      // x * id lies in [-8, 8], so the +8.5 sum is in [0.5, 16.5].
      const auto lo = std::min<uint8_t>(
          15, static_cast<uint8_t>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const auto hi = std::min<uint8_t>(
          15,
          static_cast<uint8_t>(static_cast<int8_t>(x[j + kHalf] * id + 8.5f)));
      y[2 + j] = static_cast<std::byte>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_0(std::span<const std::byte> src, std::span<float> dst) {
  CheckSizes(dst, src.size(), kQ4_0BlockElems, kQ4_0BlockBytes);
  constexpr size_t kHalf = kQ4_0BlockElems / 2;
  for (size_t b = 0; b < dst.size() / kQ4_0BlockElems; ++b) {
    const std::byte* x = src.data() + b * kQ4_0BlockBytes;
    float* y = dst.data() + b * kQ4_0BlockElems;
    const float d = LoadHalf(x);
    for (size_t j = 0; j < kHalf; ++j) {
      const auto q = static_cast<uint8_t>(x[2 + j]);
      y[j] = static_cast<float>((q & 0x0F) - 8) * d;
      y[j + kHalf] = static_cast<float>((q >> 4) - 8) * d;
    }
  }
}

namespace {

Status CheckRow(GgmlType type, size_t num_values, size_t num_bytes) {
  StatusOr<uint64_t> row_bytes = GgmlRowBytes(type, num_values);
  if (!row_bytes.ok()) return row_bytes.status();
  if (*row_bytes != num_bytes) {
    return InvalidArgumentError(std::to_string(num_values) +
                                " values of type " +
                                std::string(GgmlTypeName(type)) + " take " +
                                std::to_string(*row_bytes) + " bytes, got " +
                                std::to_string(num_bytes));
  }
  return Status::Ok();
}

Status Unsupported(GgmlType type) {
  return UnimplementedError("no (de)quantizer for tensor type " +
                            std::string(GgmlTypeName(type)));
}

}  // namespace

Status QuantizeRow(GgmlType type, std::span<const float> src,
                   std::span<std::byte> dst) {
  KV_RETURN_IF_ERROR(CheckRow(type, src.size(), dst.size()));
  switch (type) {
    case GgmlType::kF32:
      if (!src.empty()) std::memcpy(dst.data(), src.data(), dst.size());
      return Status::Ok();
    case GgmlType::kF16:
      FloatToHalfRow(src, dst);
      return Status::Ok();
    case GgmlType::kBF16:
      // Round to nearest even on the upper 16 bits (NaNs kept quiet).
      for (size_t i = 0; i < src.size(); ++i) {
        uint32_t bits = std::bit_cast<uint32_t>(src[i]);
        uint16_t h = std::isnan(src[i])
                         ? static_cast<uint16_t>((bits >> 16) | 0x40)
                         : static_cast<uint16_t>(
                               (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
        std::memcpy(dst.data() + 2 * i, &h, 2);
      }
      return Status::Ok();
    case GgmlType::kQ8_0:
      QuantizeRowQ8_0(src, dst);
      return Status::Ok();
    case GgmlType::kQ4_0:
      QuantizeRowQ4_0(src, dst);
      return Status::Ok();
    default:
      break;
  }
  using RowFn = void (*)(std::span<const float>, std::span<std::byte>);
  static constexpr std::pair<GgmlType, RowFn> kRowQuantizers[] = {
      {GgmlType::kQ4_1, QuantizeRowQ4_1},
      {GgmlType::kQ5_0, QuantizeRowQ5_0},
      {GgmlType::kQ5_1, QuantizeRowQ5_1},
      {GgmlType::kQ2_K, QuantizeRowQ2_K},
      {GgmlType::kQ3_K, QuantizeRowQ3_K},
      {GgmlType::kQ4_K, QuantizeRowQ4_K},
      {GgmlType::kQ5_K, QuantizeRowQ5_K},
      {GgmlType::kQ6_K, QuantizeRowQ6_K},
      {GgmlType::kIQ4_NL, QuantizeRowIQ4_NL},
      {GgmlType::kIQ4_XS, QuantizeRowIQ4_XS},
  };
  for (const auto& [t, fn] : kRowQuantizers) {
    if (t == type) {
      fn(src, dst);
      return Status::Ok();
    }
  }
  return Unsupported(type);
}

Status DequantizeRow(GgmlType type, std::span<const std::byte> src,
                     std::span<float> dst) {
  KV_RETURN_IF_ERROR(CheckRow(type, dst.size(), src.size()));
  switch (type) {
    case GgmlType::kF32:
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return Status::Ok();
    case GgmlType::kF16:
      HalfToFloatRow(src, dst);
      return Status::Ok();
    case GgmlType::kBF16:
      for (size_t i = 0; i < dst.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, src.data() + 2 * i, 2);
        dst[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      return Status::Ok();
    case GgmlType::kQ8_0:
      DequantizeRowQ8_0(src, dst);
      return Status::Ok();
    case GgmlType::kQ4_0:
      DequantizeRowQ4_0(src, dst);
      return Status::Ok();
    default:
      if (!HasBlockDequantizer(type)) return Unsupported(type);
      DequantizeBlocks(type, src, dst);
      return Status::Ok();
  }
}

}  // namespace kvault
