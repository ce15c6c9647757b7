// Row quantizers and dequantizers for the ggml block formats kvault writes
// and computes with. Bit-exact with ggml's reference (non-SIMD) quantizers
// (quantize_row_q8_0_ref / quantize_row_q4_0_ref), so files kvault writes
// hold the bytes llama.cpp's tools would write for the same floats. The
// Q8_0 row functions are kv's (kv/kv_dtype.h: the KV cache stores Q8_0
// rows too); this file adds Q4_0 and a dispatch by ggml type.
//
// Q8_0 block (34 bytes, 32 values): f16 d, then 32 int8 q; value = q * d,
//   d = max|x| / 127, q = round(x / d) (round half away from zero).
// Q4_0 block (18 bytes, 32 values): f16 d, then 16 bytes; byte j holds
//   value j in its low nibble and value j + 16 in its high nibble;
//   value = (nibble - 8) * d, d = m / -8 where m is the value of largest
//   magnitude (sign kept), nibble = min(15, trunc(x / d + 8.5)).
#ifndef KVAULT_MODEL_QUANTIZE_H_
#define KVAULT_MODEL_QUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "kv/kv_dtype.h"  // QuantizeRowQ8_0, DequantizeRowQ8_0, kQ8_0Block*
#include "model/ggml_types.h"

namespace kvault {

inline constexpr uint32_t kQ4_0BlockElems = 32;
inline constexpr uint32_t kQ4_0BlockBytes = 2 + kQ4_0BlockElems / 2;
// Quantizes `src` (size a multiple of 32) into `dst` (size/32 * 18 bytes).
void QuantizeRowQ4_0(std::span<const float> src, std::span<std::byte> dst);
// Expands Q4_0 blocks `src` into `dst` (dst.size()/32 * 18 == src.size()).
void DequantizeRowQ4_0(std::span<const std::byte> src, std::span<float> dst);

// Converts floats to `type`: f32, f16, bf16, q8_0, q4_0 and the types of
// quantize_rows.h (q4_1, q5_0, q5_1, q2_K..q6_K, iq4_nl, iq4_xs), all
// bit-exact with llama-quantize without an importance matrix.
// InvalidArgument when dst.size() is not the row size of src.size()
// elements of `type`; Unimplemented for other types.
Status QuantizeRow(GgmlType type, std::span<const float> src,
                   std::span<std::byte> dst);
// Converts a row of `type` (f32, f16, bf16, q8_0 or q4_0) to floats; the
// same errors as QuantizeRow.
Status DequantizeRow(GgmlType type, std::span<const std::byte> src,
                     std::span<float> dst);

}  // namespace kvault

#endif  // KVAULT_MODEL_QUANTIZE_H_
