// Byte layouts of ggml's quantized blocks (facts of the GGUF format, as
// ggml-common.h defines them), as offsets into one block. Plain constants
// only: this header is included by files compiled for AVX2/AVX-512 (see
// kernel_table.h).
//
// 32-value blocks ("legacy" quants and IQ4_NL): value j of a block lives in
// the low nibble of byte j (j < 16) or the high nibble of byte j - 16.
// 256-value super-blocks (K-quants, IQ4_XS) are split into sub-blocks of 16
// or 32 values, each with its own small integer scale (and min).
#ifndef KVAULT_MODEL_KERNELS_QUANT_BLOCKS_H_
#define KVAULT_MODEL_KERNELS_QUANT_BLOCKS_H_

#include <cstdint>

namespace kvault::kernels {

inline constexpr int64_t kBlock32 = 32;  // values per legacy block
inline constexpr int64_t kBlockK = 256;  // values per K super-block

// Q4_1: f16 d, f16 m, 16 nibble bytes; value = q * d + m.
namespace q4_1 {
inline constexpr int kD = 0, kM = 2, kQs = 4, kBytes = 20;
}
// Q5_0: f16 d, 32 high bits (u32 LE), 16 nibble bytes; value = (q - 16) d.
namespace q5_0 {
inline constexpr int kD = 0, kQh = 2, kQs = 6, kBytes = 22;
}
// Q5_1: f16 d, f16 m, u32 high bits, 16 nibble bytes; value = q d + m.
namespace q5_1 {
inline constexpr int kD = 0, kM = 2, kQh = 4, kQs = 8, kBytes = 24;
}
// Q8_1 (activations only): f16 d, f16 s = d * sum(q), 32 int8.
namespace q8_1 {
inline constexpr int kD = 0, kS = 2, kQs = 4, kBytes = 36;
}
// IQ4_NL: f16 d, 16 nibble bytes indexing kIq4nlValues; value = d * v[q].
namespace iq4_nl {
inline constexpr int kD = 0, kQs = 2, kBytes = 18;
}
// Q2_K: 16 bytes of (scale | min << 4) per 16 values, 64 bytes of 2-bit
// values, f16 d, f16 dmin; value = d * scale * q - dmin * min.
namespace q2_k {
inline constexpr int kScales = 0, kQs = 16, kD = 80, kDmin = 82, kBytes = 84;
}
// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit low bits, 12 bytes of
// sixteen 6-bit scales (biased by 32), f16 d; value = d * (s - 32) * (q - 4
// if the high bit is clear, else q).
namespace q3_k {
inline constexpr int kHmask = 0, kQs = 32, kScales = 96, kD = 108, kBytes = 110;
}
// Q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128
// nibble bytes; value = d * scale * q - dmin * min, per 32 values.
namespace q4_k {
inline constexpr int kD = 0, kDmin = 2, kScales = 4, kQs = 16, kBytes = 144;
}
// Q5_K: as Q4_K plus 32 bytes of fifth bits.
namespace q5_k {
inline constexpr int kD = 0, kDmin = 2, kScales = 4, kQh = 16, kQs = 48,
                     kBytes = 176;
}
// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales
// (one per 16 values), f16 d; value = d * scale * (q - 32).
namespace q6_k {
inline constexpr int kQl = 0, kQh = 128, kScales = 192, kD = 208, kBytes = 210;
}
// IQ4_XS: f16 d, u16 high scale bits, 4 bytes of low scale nibbles, 128
// nibble bytes; value = d * (scale - 32) * kIq4nlValues[q], per 32 values.
namespace iq4_xs {
inline constexpr int kD = 0, kScalesH = 2, kScalesL = 4, kQs = 8, kBytes = 136;
}
// Q8_K (activations only): f32 d, 256 int8, 16 int16 sums of 16 values.
namespace q8_k {
inline constexpr int kD = 0, kQs = 4, kBsums = 260, kBytes = 292;
}

// The 16 non-uniform levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_QUANT_BLOCKS_H_
