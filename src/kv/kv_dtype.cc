#include "kv/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/float16.h"

namespace kvault {
namespace {

// Rounds half away from zero into [-127, 127]; NaN maps to 0 so a bad input
// cannot cause an undefined float->int conversion.
int8_t RoundToQ8(float v) {
  if (!(v == v)) return 0;
  const float r = std::round(std::clamp(v, -127.0f, 127.0f));
  return static_cast<int8_t>(r);
}

void QuantizeBlock(const float* x, std::byte* block) {
  float amax = 0.0f;
  for (uint32_t i = 0; i < kQ8_0BlockElems; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t d_half = FloatToHalf(d);
  std::memcpy(block, &d_half, sizeof(d_half));
  int8_t qs[kQ8_0BlockElems];
  for (uint32_t i = 0; i < kQ8_0BlockElems; ++i) qs[i] = RoundToQ8(x[i] * id);
  std::memcpy(block + 2, qs, sizeof(qs));
}

void DequantizeBlock(const std::byte* block, float* x) {
  uint16_t d_half;
  std::memcpy(&d_half, block, sizeof(d_half));
  const float d = HalfToFloat(d_half);
  int8_t qs[kQ8_0BlockElems];
  std::memcpy(qs, block + 2, sizeof(qs));
  for (uint32_t i = 0; i < kQ8_0BlockElems; ++i) x[i] = qs[i] * d;
}

}  // namespace

std::string_view DtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kQ8_0:
      return "q8_0";
  }
  return "unknown";
}

StatusOr<KvDtype> ParseDtype(std::string_view name) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    if (name == DtypeName(d)) return d;
  }
  return InvalidArgumentError("unknown KV dtype \"" + std::string(name) +
                              "\", expected f32, f16 or q8_0");
}

StatusOr<KvDtype> DtypeFromId(uint32_t id) {
  const KvDtype d = static_cast<KvDtype>(static_cast<uint8_t>(id));
  if (id > 0xFF || !IsSupportedDtype(d)) {
    return InvalidArgumentError("unsupported KV dtype id " +
                                std::to_string(id) +
                                ", expected 0 (f32), 1 (f16) or 8 (q8_0)");
  }
  return d;
}

bool IsSupportedDtype(KvDtype dtype) {
  return dtype == KvDtype::kF32 || dtype == KvDtype::kF16 ||
         dtype == KvDtype::kQ8_0;
}

uint32_t DtypeBlockElems(KvDtype dtype) {
  KV_CHECK(IsSupportedDtype(dtype)) << static_cast<int>(dtype);
  return dtype == KvDtype::kQ8_0 ? kQ8_0BlockElems : 1;
}

uint64_t DtypeRowBytes(KvDtype dtype, uint64_t num_elems) {
  switch (dtype) {
    case KvDtype::kF32:
      return num_elems * 4;
    case KvDtype::kF16:
      return num_elems * 2;
    case KvDtype::kQ8_0:
      KV_CHECK_EQ(num_elems % kQ8_0BlockElems, 0u);
      return num_elems / kQ8_0BlockElems * kQ8_0BlockBytes;
  }
  KV_CHECK(false) << "unsupported dtype " << static_cast<int>(dtype);
  return 0;
}

void EncodeRow(KvDtype dtype, std::span<const float> src,
               std::span<std::byte> dst) {
  KV_CHECK_EQ(dst.size(), DtypeRowBytes(dtype, src.size()));
  switch (dtype) {
    case KvDtype::kF32:
      if (!src.empty()) std::memcpy(dst.data(), src.data(), dst.size());
      return;
    case KvDtype::kF16:
      return FloatToHalfRow(src, dst);
    case KvDtype::kQ8_0:
      return QuantizeRowQ8_0(src, dst);
  }
}

void DecodeRow(KvDtype dtype, std::span<const std::byte> src,
               std::span<float> dst) {
  KV_CHECK_EQ(src.size(), DtypeRowBytes(dtype, dst.size()));
  switch (dtype) {
    case KvDtype::kF32:
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return;
    case KvDtype::kF16:
      return HalfToFloatRow(src, dst);
    case KvDtype::kQ8_0:
      return DequantizeRowQ8_0(src, dst);
  }
}

void QuantizeRowQ8_0(std::span<const float> src, std::span<std::byte> dst) {
  KV_CHECK_EQ(dst.size(), DtypeRowBytes(KvDtype::kQ8_0, src.size()));
  const size_t num_blocks = src.size() / kQ8_0BlockElems;
  for (size_t b = 0; b < num_blocks; ++b) {
    QuantizeBlock(src.data() + b * kQ8_0BlockElems,
                  dst.data() + b * kQ8_0BlockBytes);
  }
}

void DequantizeRowQ8_0(std::span<const std::byte> src, std::span<float> dst) {
  KV_CHECK_EQ(src.size(), DtypeRowBytes(KvDtype::kQ8_0, dst.size()));
  const size_t num_blocks = dst.size() / kQ8_0BlockElems;
  for (size_t b = 0; b < num_blocks; ++b) {
    DequantizeBlock(src.data() + b * kQ8_0BlockBytes,
                    dst.data() + b * kQ8_0BlockElems);
  }
}

}  // namespace kvault
