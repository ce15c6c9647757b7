// Row quantizers of ggml's block formats beyond Q8_0 / Q4_0 (quantize.h):
// Q4_1, Q5_0, Q5_1, the k-quants Q2_K..Q6_K and the non-linear IQ4_NL /
// IQ4_XS. Each reproduces, bit for bit, what llama-quantize writes without
// an importance matrix: ggml's reference row quantizers (quantize_row_*_ref)
// for the legacy and k types, and quantize_iq4_nl / quantize_iq4_xs with
// their default weights (x^2) for the IQ4 types. Bit-exactness needs the
// same float operations in the same order, so these files are compiled
// with -ffp-contract=off and never with -ffast-math.
//
// Each function takes `src` (a multiple of the type's block size) and
// writes src.size() / block * block_bytes bytes to `dst` (which must be
// exactly that size; checked). Block layouts (little-endian, f16 = IEEE
// half) are those of ggml-common.h:
//   q4_1   (32 values, 20 B): f16 d, f16 m, 16 B nibbles (j | j+16 << 4)
//   q5_0   (32, 22 B): f16 d, 4 B high bits, 16 B low nibbles
//   q5_1   (32, 24 B): f16 d, f16 m, 4 B high bits, 16 B low nibbles
//   q2_K   (256, 84 B): 16 B scales (4-bit scale | 4-bit min), 64 B quants,
//                       f16 d, f16 dmin
//   q3_K   (256, 110 B): 32 B high-bit mask, 64 B quants, 12 B 6-bit
//                        scales, f16 d
//   q4_K   (256, 144 B): f16 d, f16 dmin, 12 B 6-bit scales/mins, 128 B
//   q5_K   (256, 176 B): f16 d, f16 dmin, 12 B scales/mins, 32 B high
//                        bits, 128 B low nibbles
//   q6_K   (256, 210 B): 128 B low nibbles, 64 B high 2 bits, 16 int8
//                        scales, f16 d
//   iq4_nl (32, 18 B): f16 d, 16 B indices into kIq4nlValues
//   iq4_xs (256, 136 B): f16 d, u16 high scale bits, 4 B low scale
//                        nibbles, 128 B indices
#ifndef KVAULT_MODEL_QUANTIZE_ROWS_H_
#define KVAULT_MODEL_QUANTIZE_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvault {

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void QuantizeRowQ4_1(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ5_0(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ5_1(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ2_K(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ3_K(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ4_K(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ5_K(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowQ6_K(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowIQ4_NL(std::span<const float> src, std::span<std::byte> dst);
void QuantizeRowIQ4_XS(std::span<const float> src, std::span<std::byte> dst);

}  // namespace kvault

#endif  // KVAULT_MODEL_QUANTIZE_ROWS_H_
