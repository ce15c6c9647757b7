// Scalar reference code for ggml's quantized blocks: unpacking a block into
// small integers and scales (shared by dequantization and the dot
// products), the activation quantizers that pair with each weight type, and
// one dot product per weight type. The SIMD kernels are tested against
// these. Out-of-line functions only (see kernel_table.h).
//
// Pairing (as llama.cpp pairs them, so the integer dot products are the
// same): Q4_0, Q5_0, Q8_0, IQ4_NL weights take Q8_0 activations; Q4_1 and
// Q5_1 take Q8_1 (which carries d * sum(q) for the min term); the K-quants
// and IQ4_XS take Q8_K (256 values, f32 scale, sums of 16).
#ifndef KVAULT_MODEL_KERNELS_QUANT_SCALAR_H_
#define KVAULT_MODEL_KERNELS_QUANT_SCALAR_H_

#include <cstddef>
#include <cstdint>

#include "model/kernels/dot_order.h"

namespace kvault::kernels {

// A 32-value block unpacked: value i = d * q[i] + m (m = 0 for the
// symmetric types).
struct Unpacked32 {
  float d = 0.0f;
  float m = 0.0f;
  int8_t q[32];
};

// A 256-value super-block unpacked: value i = (d * scale[g]) * q[i] -
// (dmin * min[g]) with g = i / 16 (types with 32-value sub-blocks repeat
// each scale twice; types without mins have min 0).
struct UnpackedK {
  float d = 0.0f;
  float dmin = 0.0f;
  int8_t q[256];
  int16_t scale[16];
  int16_t min[16];
};

// Which 32-value block types have an unpacker (ggml ids, as GgmlType).
enum class Block32Type { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kIQ4_NL };
enum class BlockKType { kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_XS };

// Unpacks one block of `type` starting at `blk`.
void UnpackBlock32(Block32Type type, const std::byte* blk, Unpacked32* out);
// Unpacks one super-block of `type` starting at `blk`.
void UnpackBlockK(BlockKType type, const std::byte* blk, UnpackedK* out);

// Eight 6-bit scales and mins of Q4_K/Q5_K from their 12 packed bytes.
void UnpackQ4KScales(const uint8_t* packed, uint8_t scales[8], uint8_t mins[8]);
// Sixteen 6-bit Q3_K scales from their 12 packed bytes, minus the bias 32.
void UnpackQ3KScales(const uint8_t* packed, int8_t scales[16]);

// Activation quantizers, as llama.cpp's x86 build runs them: Q8_1 with
// d = amax / 127 and round-half-even(x * 127 / amax), s = f16(d * sum q);
// Q8_K with d = max / -127 (max: the value of largest magnitude) and
// round-half-even(x * -127 / max), capped at 127, plus sums of 16.
// Q8_0 activations as llama.cpp's x86 build quantizes them (not ggml's
// reference, which divides by d and rounds half away from zero): amax over
// the block (NaN ignored), d = amax / 127, q = round-half-even(x * 127 /
// amax) clamped to [-127, 127], NaN -> 0.
void QuantizeRowQ8_0Act(const float* x, int64_t n, std::byte* out);
void QuantizeRowQ8_1(const float* x, int64_t n, std::byte* out);
void QuantizeRowQ8_K(const float* x, int64_t n, std::byte* out);

// Dot product of one weight row (n values) with one activation row of the
// paired type. Integer sums are exact per block (per super-block for the K
// types); the float combination is done once per block in block order.
float DotQ8_0Q8_0(const std::byte* w, const std::byte* x, int64_t n);
float DotQ4_1Q8_1(const std::byte* w, const std::byte* x, int64_t n);
float DotQ5_0Q8_0(const std::byte* w, const std::byte* x, int64_t n);
float DotQ5_1Q8_1(const std::byte* w, const std::byte* x, int64_t n);
float DotIq4nlQ8_0(const std::byte* w, const std::byte* x, int64_t n);
// Q2_K and Q4_K sum in `order` (see DotOrder).
float DotQ2KQ8K(const std::byte* w, const std::byte* x, int64_t n,
                DotOrder order);
float DotQ3KQ8K(const std::byte* w, const std::byte* x, int64_t n);
float DotQ4KQ8K(const std::byte* w, const std::byte* x, int64_t n,
                DotOrder order);
float DotQ5KQ8K(const std::byte* w, const std::byte* x, int64_t n);
float DotQ6KQ8K(const std::byte* w, const std::byte* x, int64_t n);
float DotIq4xsQ8K(const std::byte* w, const std::byte* x, int64_t n);

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_QUANT_SCALAR_H_
