// Dequantization of ggml's quantized block types beyond Q8_0/Q4_0 (which
// quantize.h keeps): Q4_1, Q5_0, Q5_1, IQ4_NL (32-value blocks) and Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (256-value super-blocks). The float
// operations per value are those of ggml's dequantize_row_* (e.g. Q4_K:
// (d * scale) * q - dmin * min), so a row dequantized here equals the one
// llama.cpp's get_rows produces.
#ifndef KVAULT_MODEL_DEQUANTIZE_H_
#define KVAULT_MODEL_DEQUANTIZE_H_

#include <cstddef>
#include <span>

#include "core/status.h"
#include "model/ggml_types.h"

namespace kvault {

// Returns true when DequantizeBlocks handles `type`.
bool HasBlockDequantizer(GgmlType type);
// Expands whole blocks of `type` from `src` into `dst`. Precondition:
// HasBlockDequantizer(type) and src.size() is the row size of dst.size()
// values (checked by the caller, e.g. DequantizeRow).
void DequantizeBlocks(GgmlType type, std::span<const std::byte> src,
                      std::span<float> dst);

}  // namespace kvault

#endif  // KVAULT_MODEL_DEQUANTIZE_H_
