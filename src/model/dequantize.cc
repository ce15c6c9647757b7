#include "model/dequantize.h"

#include "core/check.h"
#include "model/kernels/quant_blocks.h"
#include "model/kernels/quant_scalar.h"

namespace kvault {
namespace {

using kernels::Block32Type;
using kernels::BlockKType;

struct Kind {
  GgmlType type;
  bool super_block;  // 256 values (BlockKType) vs 32 (Block32Type)
  int block_bytes;
  Block32Type type32;
  BlockKType type_k;
};

constexpr Kind kKinds[] = {
    {GgmlType::kQ4_1, false, kernels::q4_1::kBytes, Block32Type::kQ4_1, {}},
    {GgmlType::kQ5_0, false, kernels::q5_0::kBytes, Block32Type::kQ5_0, {}},
    {GgmlType::kQ5_1, false, kernels::q5_1::kBytes, Block32Type::kQ5_1, {}},
    {GgmlType::kIQ4_NL,
     false,
     kernels::iq4_nl::kBytes,
     Block32Type::kIQ4_NL,
     {}},
    {GgmlType::kQ2_K, true, kernels::q2_k::kBytes, {}, BlockKType::kQ2_K},
    {GgmlType::kQ3_K, true, kernels::q3_k::kBytes, {}, BlockKType::kQ3_K},
    {GgmlType::kQ4_K, true, kernels::q4_k::kBytes, {}, BlockKType::kQ4_K},
    {GgmlType::kQ5_K, true, kernels::q5_k::kBytes, {}, BlockKType::kQ5_K},
    {GgmlType::kQ6_K, true, kernels::q6_k::kBytes, {}, BlockKType::kQ6_K},
    {GgmlType::kIQ4_XS, true, kernels::iq4_xs::kBytes, {}, BlockKType::kIQ4_XS},
};

const Kind* FindKind(GgmlType type) {
  for (const Kind& k : kKinds) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

void Expand32(const kernels::Unpacked32& u, float* y) {
  for (int j = 0; j < 32; ++j) {
    y[j] = static_cast<float>(u.q[j]) * u.d + u.m;
  }
}

void ExpandK(const kernels::UnpackedK& u, float* y) {
  for (int g = 0; g < 16; ++g) {
    const float dl = u.d * static_cast<float>(u.scale[g]);
    const float ml = u.dmin * static_cast<float>(u.min[g]);
    for (int i = 0; i < 16; ++i) {
      y[16 * g + i] = dl * static_cast<float>(u.q[16 * g + i]) - ml;
    }
  }
}

}  // namespace

bool HasBlockDequantizer(GgmlType type) { return FindKind(type) != nullptr; }

void DequantizeBlocks(GgmlType type, std::span<const std::byte> src,
                      std::span<float> dst) {
  const Kind* kind = FindKind(type);
  KV_CHECK(kind != nullptr) << "no dequantizer for " << GgmlTypeName(type);
  const size_t values =
      kind->super_block ? kernels::kBlockK : kernels::kBlock32;
  const size_t num_blocks = dst.size() / values;
  KV_CHECK_EQ(num_blocks * kind->block_bytes, src.size());
  for (size_t b = 0; b < num_blocks; ++b) {
    const std::byte* blk = src.data() + b * kind->block_bytes;
    float* y = dst.data() + b * values;
    if (kind->super_block) {
      kernels::UnpackedK u;
      kernels::UnpackBlockK(kind->type_k, blk, &u);
      ExpandK(u, y);
    } else {
      kernels::Unpacked32 u;
      kernels::UnpackBlock32(kind->type32, blk, &u);
      Expand32(u, y);
    }
  }
}

}  // namespace kvault
