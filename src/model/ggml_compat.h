// Numerics of llama.cpp's CPU backend (ggml's x86 builds: AVX2 + FMA +
// F16C, or AVX-512), reproduced operation for operation so that the forward
// pass gives llama.cpp's logits to the last bits on F32 and F16 models.
// Where the source leaves a choice to the compiler (which products are
// fused into FMAs) the choice here is the one that reproduces ../shared/golden
// (tests/model/golden_test.cc); each one was checked to matter there.
// The small golden models are chaotic under fp16 rounding of the KV cache:
// one K/V value that rounds the other way moves later log-probabilities by
// up to 1e-2, so the summation orders and roundings below must match, not
// just be as accurate. Where the two builds sum differently, a GgmlBuild
// argument picks which one's order is reproduced.
//
// Every function has a portable implementation (the reference: explicit
// std::fma and plain float operations in ggml's order) and vectorised ones
// (AVX2/FMA/F16C; AVX-512 for some) that give the same bits. A function
// taking a kernels::Isa runs that set's form; the set must be one of
// kernels::SupportedIsas() (kScalar: the portable reference). The matrix
// products live in ggml_matmul.cc and the forms they are built from in
// ggml_dot.h; the element-wise operations in ggml_compat.cc.
#ifndef KVAULT_MODEL_GGML_COMPAT_H_
#define KVAULT_MODEL_GGML_COMPAT_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "model/ggml_types.h"
#include "model/kernels/kernels.h"

namespace kvault::ggml_compat {

// The llama.cpp x86 build whose numerics the forward pass reproduces where
// builds differ: the float matmuls' summation orders (MatMul, DotF16, as
// ggml_vec_dot_f32/f16 and tinyBLAS use 8-lane vectors in one, 16-lane ones
// in the other) and ggml_vec_swiglu_f32: builds with AVX-512F and DQ take
// 16-value blocks and ggml_v_expf's AVX-512 form (1 + p(b) rounded, then
// scaled by 2^n exactly); AVX2 builds take 8-value blocks and its AVX2 form
// (k + k * p(b) fused). ../shared/golden was recorded by an AVX2 build,
// golden/kquant and golden/arch by AVX-512 ones.
enum class GgmlBuild : uint8_t { kAvx2, kAvx512 };

// Returns the build a native llama.cpp compile makes on this CPU (the
// features in use: KVAULT_KERNELS=avx2 gives kAvx2 on any x86 CPU).
GgmlBuild NativeGgmlBuild();

// How ggml computes one token's products with a float weight matrix
// (kernels::DotOrder). llama.cpp uses llamafile's tinyBLAS for batches of
// >= 2 tokens and ggml_vec_dot for a single token; the forward pass picks
// per sequence (see inference.cc), so a token's result never depends on
// other sequences. With L = 8 lanes (kAvx2) or 16 (kAvx512):
//  - kGemv: ggml_vec_dot_f32/f16: four L-lane FMA accumulators over
//    4L-value steps, reduced (a0+a2)+(a1+a3), then the lanes: kAvx2 lo+hi
//    and two hadds; kAvx512 as _mm512_reduce_add_ps (lanes i + (i+8),
//    i + (i+4), then (l0+l2)+(l1+l3)). The tail (cols % 4L) is added one
//    product at a time (F32: in float, unfused; F16: in double).
//  - kGemm: tinyBLAS<L>: one L-lane FMA accumulator over L-value steps,
//    then its horizontal sum (kAvx2: hi+lo, lanes 0+2 and 1+3, then those
//    two; kAvx512: _mm512_reduce_add_ps). tinyBLAS refuses cols % L != 0
//    and rows % 4 != 0; then kGemv is used (as llama.cpp falls back).
using kernels::DotOrder;

// Returns true for the weight types MatMul supports (F32 and F16).
bool Supports(GgmlType type);

// y[t, r] = W[r] . x[t] for t < order.size(), r < w.rows, each in the
// order order[t] names as `build` sums it. For F16 weights x is rounded to
// fp16 first (ggml converts activations to the weights' vec_dot type, F16,
// for vec_dot and tinyBLAS alike). x: [num_tokens, w.cols]; y:
// [num_tokens, w.rows]. `pool` may be null (single-threaded). Requires
// Supports(w.type). Every y element depends only on its row, its token's
// x, its order and the build.
void MatMul(const kernels::MatrixView& w, const float* x,
            std::span<const DotOrder> order, float* y, GgmlBuild build,
            kernels::Isa isa, kernels::ComputePool* pool);

// out[i] = (x[i] * s) * weight[i] with s = 1 / sqrtf(mean), mean the
// float of the double sum of the float squares x[i] * x[i] over n, plus eps
// (ggml_rms_norm followed by ggml_mul).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out);

// Returns ggml_v_expf(x) (the polynomial of ggml's SIMD blocks, not libm's
// expf) in `build`'s form.
float VExpf(float x, GgmlBuild build);

// out[i] = silu(gate[i]) * up[i] for one token's row of n values, as
// `build`'s ggml_vec_swiglu_f32: whole blocks use ggml_v_expf (a
// polynomial, not libm's expf), the tail uses expf. `out` may alias gate
// or up.
void SwiGlu(const float* gate, const float* up, int64_t n, GgmlBuild build,
            kernels::Isa isa, float* out);

// Returns sum_i half(k[i]) * q[i] in `build`'s ggml_vec_dot_f16 order,
// which flash attention takes for q . k: `build`'s kGemv order of one F16
// row (see DotOrder), the tail (n % step values) added in double. The orders
// differ from 32-value heads on, so a head of 64 or 128 needs the recording
// build's. q holds fp16-exact values (the query rounded to fp16), k holds n
// fp16 values.
float DotF16(const std::byte* k, const float* q, int64_t n, GgmlBuild build,
             kernels::Isa isa);

}  // namespace kvault::ggml_compat

#endif  // KVAULT_MODEL_GGML_COMPAT_H_
