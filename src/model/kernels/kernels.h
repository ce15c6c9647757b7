// The compute kernels of the forward pass, behind one interface. Every
// kernel has a scalar reference; SIMD versions (AVX2+FMA, AVX-512 where the
// CPU has it) are picked by the caller, who holds the choice (a Kernels
// value, ComputeBackend's in a forward pass). Shapes follow ggml's
// convention for weights: a matrix is `rows` rows of `cols` values, stored
// row-major in the ggml block layout of its type, so y = W x is one dot
// product per row.
//
// Determinism contract (what "paging and batching are invisible" rests on):
// for a given kernel table, the value computed for one output element
// depends only on the inputs of that element and its token's DotOrder —
// never on num_tokens, on the other tokens of the batch, on thread count or
// on how work is split.
#ifndef KVAULT_MODEL_KERNELS_KERNELS_H_
#define KVAULT_MODEL_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/ggml_types.h"
#include "model/kernels/dot_order.h"

namespace kvault::kernels {

class ComputePool;
struct KernelTable;

// How a matrix's blocks are arranged in memory.
enum class WeightLayout : uint8_t {
  // Row after row, each row's blocks in order (GGUF's layout).
  kRows,
  // Groups of 16 rows; within a group, block b of all 16 rows is one
  // unit of 16 * block_bytes bytes, the units in block order. A unit holds
  // first the rows' h leading block bytes (h = 2, the f16 scale, for Q4_0;
  // 0 for Q4_K) row after row, then dword j of the rest of row r's block at
  // dword 16 * j + r. A group occupies the same bytes as its 16 rows in
  // kRows, so it still starts at data + r0 * row_bytes. Lets a kernel load
  // one dword of 16 rows with one instruction (ggml calls such layouts
  // "repacked").
  kGroups16,
};

// A weight matrix viewed in place (e.g. inside a memory-mapped GGUF file).
struct MatrixView {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features; a multiple of the block size
  const std::byte* data = nullptr;
  size_t row_bytes = 0;  // bytes between consecutive rows
  WeightLayout layout = WeightLayout::kRows;
};

// The instruction sets a kernel table exists for, in increasing order
// within each family (x86-64: AVX2+FMA+F16C, AVX-512 with VNNI; aarch64:
// NEON, NEON with SDOT/UDOT). Their names are core/cpu_features.h's levels.
enum class Isa : uint8_t { kScalar, kAvx2, kAvx512, kNeon, kNeonDot };

// Returns "scalar", "avx2", "avx512", "neon" or "neon-dotprod".
std::string_view IsaName(Isa isa);
// Returns the set named `name`, or nullopt for a name that is none.
std::optional<Isa> IsaFromName(std::string_view name);
// Returns the sets this binary has and the CPU features in use allow
// (core/cpu_features.h: the CPU's, capped by KVAULT_KERNELS), kScalar first.
std::vector<Isa> SupportedIsas();
// Returns the best of them (the last of SupportedIsas()).
Isa BestIsa();

// One entry of a kernel set (a MatMul weight kind, e.g. "q4_k", or a
// vector kernel, e.g. "rms_norm") and the set whose own code runs it:
// the set itself, or the lower set it falls back to (kernel_table.h).
struct KernelEntry {
  std::string name;
  Isa source;
};
// Returns every entry of `isa`'s kernels with its source. Requires isa in
// SupportedIsas().
std::vector<KernelEntry> KernelEntries(Isa isa);

// Returns true when the kernels of `isa` multiply `w` (kRows) faster once
// rewritten as kGroups16 (today: Q4_0 and Q4_K with AVX-512 VNNI and with
// AVX2; rows a multiple of 16, rows dense).
bool PrefersGroups16(const MatrixView& w, Isa isa);
// Rewrites w's bytes in place from kRows to kGroups16 and marks `w` so;
// `bytes` is w's data, writable (w.rows * w.row_bytes bytes). Requires
// PrefersGroups16(w, isa) for some isa (the layout is then valid on every
// ISA; others read it through the scalar kernels).
void RewriteAsGroups16(std::span<std::byte> bytes, MatrixView* w);

// The kernels of one instruction set. A value (a table pointer), cheap to
// copy; the choice is the caller's, so one process may run several sets
// side by side (tests compare each with the scalar reference).
class Kernels {
 public:
  // The kernels of `isa`. Requires isa in SupportedIsas().
  explicit Kernels(Isa isa);

  // Returns the instruction set.
  Isa isa() const { return isa_; }

  // y[t, r] = sum_c W[r, c] * x[t, c] for t < num_tokens, r < w.rows.
  // x: [num_tokens, w.cols] f32; y: [num_tokens, w.rows] f32. Quantized
  // weights quantize x first (to Q8_0, Q8_1 or Q8_K blocks, the format
  // llama.cpp pairs with the weight type) and use integer dot products.
  // `pool` may be null (single-threaded); with a pool the rows are split
  // over its workers and the calling thread. Each y element is computed by
  // the same operations whatever num_tokens, the tiling or the split,
  // namely those of its token's order: `orders` holds num_tokens entries,
  // or none for all kGemv.
  void MatMul(const MatrixView& w, const float* x, int64_t num_tokens, float* y,
              ComputePool* pool, std::span<const DotOrder> orders = {}) const;

  // out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i < n.
  void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
               float* out) const;
  // In place: x[i] = exp(x[i] - max) / sum, i < n.
  void Softmax(float* x, int64_t n) const;
  // out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
  void SiluMul(const float* gate, const float* up, int64_t n, float* out) const;
  // Returns sum_i a[i] * b[i] over f32 vectors.
  float DotF32(const float* a, const float* b, int64_t n) const;
  // y[i] += a * x[i].
  void Axpy(float a, const float* x, int64_t n, float* y) const;
  // Returns sum_i half(a[i]) * b[i]; `a` holds n IEEE fp16 values (a K row
  // of an F16 KV cache).
  float DotF16F32(const std::byte* a, const float* b, int64_t n) const;
  // y[i] += s * half(x[i]) (accumulating an F16 V row).
  void AxpyF16(float s, const std::byte* x, int64_t n, float* y) const;
  // out[i] = e^x[i], i < n (out may equal x). The SIMD sets use a
  // polynomial within ~2 ulp of std::exp (scalar: std::exp itself); e^-inf
  // and anything below -87.3 give 0. out[i] depends on x[i] only, never on
  // n or i, so a caller may batch any set of exponents (e.g. attention's
  // online-softmax rescales) without changing results.
  void ExpF32(const float* x, int64_t n, float* out) const;
  // Quantizes activations x[0, n) (n a multiple of 32) into n / 32 Q8_0
  // blocks at `out` (34 bytes each) the way llama.cpp's x86 build does,
  // bit-identical to QuantizeRowQ8_0Act (quant_scalar.h) on every ISA.
  void QuantizeQ8_0(const float* x, int64_t n, std::byte* out) const;
  // Q8_K activation blocks of x (n a multiple of 256); every set gives
  // QuantizeRowQ8_K's bytes.
  void QuantizeQ8_K(const float* x, int64_t n, std::byte* out) const;

 private:
  Isa isa_;
  const KernelTable* table_;
};

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_KERNELS_H_
