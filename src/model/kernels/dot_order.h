// kernels::DotOrder, shared by kernels.h and the kernel table.
#ifndef KVAULT_MODEL_KERNELS_DOT_ORDER_H_
#define KVAULT_MODEL_KERNELS_DOT_ORDER_H_

#include <cstdint>

namespace kvault::kernels {

// The order in which llama.cpp sums one token's products with a weight
// matrix: kGemv for a token it multiplies alone, kGemm for one it
// multiplies as part of a batch. Floats: its vec_dot vs llamafile's
// tinyBLAS (ggml_compat.h). Q4_K and Q2_K: its repacked GEMV, one float
// step per 256 values, vs its repacked GEMM, one per 64 (Q4_K) or 128
// (Q2_K) values. Other quantized types sum alike in both.
enum class DotOrder : uint8_t { kGemv, kGemm };

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_DOT_ORDER_H_
