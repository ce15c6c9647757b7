// IEEE 754 binary16 ("half") <-> binary32 conversion. Float -> half rounds to
// nearest, ties to even; overflow gives infinity; NaNs stay NaN (quieted,
// sign and top payload bits kept), exactly as x86 F16C does, so the portable
// path and the F16C path (picked at run time) give identical bits.
#ifndef KVAULT_CORE_FLOAT16_H_
#define KVAULT_CORE_FLOAT16_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvault {

// Returns the half nearest to `value` (ties to even) as raw bits.
uint16_t FloatToHalf(float value);
// Returns the float equal to the half with raw bits `half` (exact; NaNs
// come back quieted).
float HalfToFloat(uint16_t half);

// Converts `src` to halves stored little-endian in `dst` (2 bytes each, any
// alignment); dst.size() must be 2 * src.size().
void FloatToHalfRow(std::span<const float> src, std::span<std::byte> dst);
// Converts little-endian halves in `src` to floats in `dst`; src.size() must
// be 2 * dst.size().
void HalfToFloatRow(std::span<const std::byte> src, std::span<float> dst);

// Returns true when the row functions use the F16C instructions.
bool Float16UsesF16c();

// The portable row conversions, bit-identical to the F16C ones; exposed so
// tests can compare both paths.
void FloatToHalfRowPortable(std::span<const float> src,
                            std::span<std::byte> dst);
// Portable counterpart of HalfToFloatRow.
void HalfToFloatRowPortable(std::span<const std::byte> src,
                            std::span<float> dst);

}  // namespace kvault

#endif  // KVAULT_CORE_FLOAT16_H_
