#include "model/kernels/kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/float16.h"
#include "kv/kv_dtype.h"
#include "model/kernels/compute_pool.h"
#include "model/kernels/kernel_table.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace {

// Rows per work item: a multiple of every ISA's row tile, small enough that
// a few items per thread even out uneven cores.
constexpr int64_t kRowChunk = 16;
// Work items per participating thread (dynamic claiming evens out stalls).
constexpr int64_t kChunksPerThread = 4;
// Below this many tokens quantizing the activations is not worth a fan-out.
constexpr int64_t kMinTokensForParallelQuantize = 8;
// Below this many multiply-adds a MatMul runs on the calling thread alone.
constexpr int64_t kMinParallelMacs = int64_t{1} << 17;

// The activation format a weight kind pairs with (see quant_scalar.h).
// BF16 weights take activations rounded to bf16 (kept as f32 values), as
// ggml converts them to the weights' vec_dot type: the products are then
// exact, and results follow llama.cpp's.
enum class Activation { kF32, kBf16, kQ8_0, kQ8_1, kQ8_K };

struct KindInfo {
  GgmlType type;
  WeightKind kind;
  Activation activation;
};

constexpr KindInfo kKinds[] = {
    {GgmlType::kF32, kWeightF32, Activation::kF32},
    {GgmlType::kF16, kWeightF16, Activation::kF32},
    {GgmlType::kBF16, kWeightBf16, Activation::kBf16},
    {GgmlType::kQ8_0, kWeightQ8_0, Activation::kQ8_0},
    {GgmlType::kQ4_0, kWeightQ4_0, Activation::kQ8_0},
    {GgmlType::kQ4_1, kWeightQ4_1, Activation::kQ8_1},
    {GgmlType::kQ5_0, kWeightQ5_0, Activation::kQ8_0},
    {GgmlType::kQ5_1, kWeightQ5_1, Activation::kQ8_1},
    {GgmlType::kIQ4_NL, kWeightIq4nl, Activation::kQ8_0},
    {GgmlType::kQ2_K, kWeightQ2_K, Activation::kQ8_K},
    {GgmlType::kQ3_K, kWeightQ3_K, Activation::kQ8_K},
    {GgmlType::kQ4_K, kWeightQ4_K, Activation::kQ8_K},
    {GgmlType::kQ5_K, kWeightQ5_K, Activation::kQ8_K},
    {GgmlType::kQ6_K, kWeightQ6_K, Activation::kQ8_K},
    {GgmlType::kIQ4_XS, kWeightIq4xs, Activation::kQ8_K},
};

// The kernels of layout WeightLayout::kGroups16.
constexpr KindInfo kGroups16Kinds[] = {
    {GgmlType::kQ4_K, kWeightQ4_KGroups16, Activation::kQ8_K},
    {GgmlType::kQ4_0, kWeightQ4_0Groups16, Activation::kQ8_0},
};

// Leading bytes of each row's block that kGroups16 keeps row after row.
size_t Groups16HeadBytes(GgmlType type) {
  return type == GgmlType::kQ4_0 ? 2 : 0;
}

const KindInfo& KindOf(GgmlType type,
                       WeightLayout layout = WeightLayout::kRows) {
  if (layout == WeightLayout::kGroups16) {
    for (const KindInfo& k : kGroups16Kinds) {
      if (k.type == type) return k;
    }
    KV_CHECK(false) << "no kGroups16 kernel for " << GgmlTypeName(type);
  }
  for (const KindInfo& k : kKinds) {
    if (k.type == type) return k;
  }
  KV_CHECK(false) << "MatMul: no kernel for weight type " << GgmlTypeName(type);
  return kKinds[0];
}

using QuantizeFn = void (*)(const float* x, int64_t n, std::byte* out);

// x rounded to bf16 (nearest even; NaN stays NaN), written as f32 values.
void RoundToBf16(const float* x, int64_t n, std::byte* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof(bits));
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
      bits |= 0x00400000u;  // quiet NaN
    } else {
      bits += 0x7FFFu + ((bits >> 16) & 1u);
    }
    bits &= 0xFFFF0000u;
    std::memcpy(out + sizeof(float) * i, &bits, sizeof(bits));
  }
}

// The quantizer of `activation` and its bytes for `cols` values.
QuantizeFn ActivationQuantizer(const KernelTable& table, Activation activation,
                               int64_t cols, size_t* row_bytes) {
  switch (activation) {
    case Activation::kQ8_0:
      *row_bytes = cols / kQ8_0BlockElems * kQ8_0BlockBytes;
      return table.quantize_q8_0;
    case Activation::kQ8_1:
      *row_bytes = cols / kBlock32 * q8_1::kBytes;
      return table.quantize_q8_1;
    case Activation::kQ8_K:
      *row_bytes = cols / kBlockK * q8_k::kBytes;
      return table.quantize_q8_k;
    case Activation::kBf16:
      *row_bytes = cols * sizeof(float);
      return RoundToBf16;
    case Activation::kF32:
      break;
  }
  *row_bytes = cols * sizeof(float);
  return nullptr;
}

// Runs fn(i) for i < n on `pool`'s workers and the caller, or inline
// without a pool.
template <typename Fn>
void RunParallel(ComputePool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(static_cast<size_t>(n),
                    [&fn](size_t i) { fn(static_cast<int64_t>(i)); });
}

// Quantizes every token row of x with `quantize_fn` into rows of `qx`.
void QuantizeActivations(QuantizeFn quantize_fn, const float* x, int64_t cols,
                         int64_t num_tokens, std::byte* qx, size_t q_row_bytes,
                         ComputePool* pool) {
  auto quantize = [&](int64_t t) {
    quantize_fn(x + t * cols, cols, qx + t * q_row_bytes);
  };
  if (num_tokens < kMinTokensForParallelQuantize) pool = nullptr;
  RunParallel(pool, num_tokens, quantize);
}

// The last activations this thread quantized, kept because a layer
// multiplies the same input by several matrices (Q, K, V; gate, up) and
// scalar quantizing cost ~13% of a prefill. (The SIMD quantizers are ~10x
// faster, about the cost of the comparison, so on AVX2/AVX-512 the cache
// is roughly neutral; it still pays on the scalar path.) A hit needs the
// same pointer, shape and contents (compared in full), so a caller
// rewriting its buffer in place still gets fresh blocks.
struct QuantizedCache {
  QuantizeFn quantize_fn = nullptr;
  const float* x = nullptr;
  int64_t cols = 0;
  int64_t num_tokens = 0;
  std::vector<float> x_copy;         // [num_tokens, cols]
  std::vector<std::byte> quantized;  // [num_tokens, q_row_bytes]
};

// Returns x quantized by `quantize_fn` to rows of q_row_bytes, valid until
// this thread's next call.
const std::byte* QuantizedActivations(QuantizeFn quantize_fn, const float* x,
                                      int64_t cols, int64_t num_tokens,
                                      size_t q_row_bytes, ComputePool* pool) {
  thread_local QuantizedCache cache;
  const size_t num_values = static_cast<size_t>(cols * num_tokens);
  if (cache.quantize_fn == quantize_fn && cache.x == x && cache.cols == cols &&
      cache.num_tokens == num_tokens &&
      std::memcmp(cache.x_copy.data(), x, num_values * sizeof(float)) == 0) {
    return cache.quantized.data();
  }
  cache.quantized.resize(q_row_bytes * num_tokens);
  QuantizeActivations(quantize_fn, x, cols, num_tokens, cache.quantized.data(),
                      q_row_bytes, pool);
  cache.quantize_fn = quantize_fn;
  cache.x_copy.assign(x, x + num_values);
  cache.x = x;
  cache.cols = cols;
  cache.num_tokens = num_tokens;
  return cache.quantized.data();
}

// The rows MatMul's kernels read for x: x itself for f32 activations, else
// x quantized to `activation`'s format. Sets *row_bytes to a row's bytes.
const std::byte* MatMulActivations(const KernelTable& table,
                                   Activation activation, const float* x,
                                   int64_t cols, int64_t num_tokens,
                                   ComputePool* pool, size_t* row_bytes) {
  const QuantizeFn quantize =
      ActivationQuantizer(table, activation, cols, row_bytes);
  if (quantize == nullptr) return reinterpret_cast<const std::byte*>(x);
  const int64_t block = activation == Activation::kQ8_K   ? kBlockK
                        : activation == Activation::kBf16 ? 1
                                                          : kBlock32;
  KV_CHECK_EQ(cols % block, 0) << "quantized MatMul cols";
  return QuantizedActivations(quantize, x, cols, num_tokens, *row_bytes, pool);
}

// Rows per work item for `rows` rows on `pool` (or one thread): about
// kChunksPerThread items per thread, a multiple of kRowChunk.
int64_t RowsPerChunk(int64_t rows, const ComputePool* pool) {
  const int64_t num_threads =
      pool == nullptr ? 1 : static_cast<int64_t>(pool->num_workers()) + 1;
  const int64_t num_chunks_wanted = num_threads * kChunksPerThread;
  const int64_t chunk = (rows + num_chunks_wanted - 1) / num_chunks_wanted;
  return std::max<int64_t>(kRowChunk,
                           (chunk + kRowChunk - 1) / kRowChunk * kRowChunk);
}

}  // namespace

Kernels::Kernels(Isa isa) : isa_(isa), table_(KernelTableFor(isa)) {
  KV_CHECK(table_ != nullptr)
      << "kernel set " << IsaName(isa) << " not supported here";
}

void Kernels::MatMul(const MatrixView& w, const float* x, int64_t num_tokens,
                     float* y, ComputePool* pool,
                     std::span<const DotOrder> orders) const {
  if (w.rows <= 0 || num_tokens <= 0) return;
  KV_CHECK(orders.empty() || std::ssize(orders) == num_tokens)
      << "MatMul orders";
  const KindInfo& kind = KindOf(w.type, w.layout);
  MatMulArgs args;
  args.w = w.data;
  args.w_row_bytes = w.row_bytes;
  args.cols = w.cols;
  args.num_tokens = num_tokens;
  args.y = y;
  args.y_stride = w.rows;
  args.orders = orders.empty() ? nullptr : orders.data();
  args.x = MatMulActivations(*table_, kind.activation, x, w.cols, num_tokens,
                             pool, &args.x_row_bytes);
  const MatMulRowsFn rows_fn = table_->matmul[kind.kind];
  // Even a spinning pool costs ~a microsecond per loop; tiny products
  // (stories260K's) are faster on one thread. Results do not change.
  if (w.rows * w.cols * num_tokens < kMinParallelMacs) pool = nullptr;
  const int64_t chunk = RowsPerChunk(w.rows, pool);
  const int64_t num_chunks = (w.rows + chunk - 1) / chunk;
  RunParallel(pool, num_chunks, [&](int64_t i) {
    rows_fn(args, i * chunk, std::min(w.rows, (i + 1) * chunk));
  });
}

bool PrefersGroups16(const MatrixView& w, Isa isa) {
  const bool has_kernel =
      (isa == Isa::kAvx512 &&
       (w.type == GgmlType::kQ4_K || w.type == GgmlType::kQ4_0)) ||
      (isa == Isa::kAvx2 &&
       (w.type == GgmlType::kQ4_0 || w.type == GgmlType::kQ4_K));
  if (!has_kernel || w.layout != WeightLayout::kRows) return false;
  const GgmlTypeInfo& info = GetGgmlTypeInfo(w.type);
  const int64_t dense_row_bytes =
      w.cols / info.block_size * int64_t{info.bytes_per_block};
  return w.rows % 16 == 0 &&
         static_cast<int64_t>(w.row_bytes) == dense_row_bytes &&
         (info.bytes_per_block - Groups16HeadBytes(w.type)) % 4 == 0;
}

void RewriteAsGroups16(std::span<std::byte> bytes, MatrixView* w) {
  KV_CHECK(w->layout == WeightLayout::kRows && w->rows % 16 == 0 &&
           bytes.data() == w->data &&
           bytes.size() == static_cast<size_t>(w->rows) * w->row_bytes)
      << "RewriteAsGroups16 of a matrix that is not dense kRows";
  const GgmlTypeInfo& info = GetGgmlTypeInfo(w->type);
  const size_t head = Groups16HeadBytes(w->type);
  const size_t dwords = (info.bytes_per_block - head) / 4;  // per block
  const int64_t num_blocks = w->cols / info.block_size;
  const size_t group_bytes = 16 * w->row_bytes;
  std::vector<std::byte> rows(group_bytes);  // one group as read
  for (int64_t r0 = 0; r0 < w->rows; r0 += 16) {
    std::byte* group = bytes.data() + r0 * w->row_bytes;
    std::memcpy(rows.data(), group, group_bytes);
    for (int64_t b = 0; b < num_blocks; ++b) {
      std::byte* unit = group + b * 16 * info.bytes_per_block;
      for (int r = 0; r < 16; ++r) {
        const std::byte* block =
            rows.data() + r * w->row_bytes + b * info.bytes_per_block;
        std::memcpy(unit + r * head, block, head);
        for (size_t j = 0; j < dwords; ++j) {
          std::memcpy(unit + 16 * head + 4 * (16 * j + r), block + head + 4 * j,
                      4);
        }
      }
    }
  }
  w->layout = WeightLayout::kGroups16;
}

void Kernels::RmsNorm(const float* x, const float* weight, int64_t n, float eps,
                      float* out) const {
  table_->rms_norm(x, weight, n, eps, out);
}

void Kernels::Softmax(float* x, int64_t n) const { table_->softmax(x, n); }

void Kernels::SiluMul(const float* gate, const float* up, int64_t n,
                      float* out) const {
  table_->silu_mul(gate, up, n, out);
}

float Kernels::DotF32(const float* a, const float* b, int64_t n) const {
  return table_->dot_f32(a, b, n);
}

void Kernels::Axpy(float a, const float* x, int64_t n, float* y) const {
  table_->axpy(a, x, n, y);
}

float Kernels::DotF16F32(const std::byte* a, const float* b, int64_t n) const {
  return table_->dot_f16_f32(a, b, n);
}

void Kernels::AxpyF16(float s, const std::byte* x, int64_t n, float* y) const {
  table_->axpy_f16(s, x, n, y);
}

void Kernels::ExpF32(const float* x, int64_t n, float* out) const {
  table_->exp(x, n, out);
}

void Kernels::QuantizeQ8_0(const float* x, int64_t n, std::byte* out) const {
  KV_CHECK_EQ(n % kQ8_0BlockElems, 0) << "QuantizeQ8_0 length";
  table_->quantize_q8_0(x, n, out);
}

void Kernels::QuantizeQ8_K(const float* x, int64_t n, std::byte* out) const {
  KV_CHECK_EQ(n % kBlockK, 0) << "QuantizeQ8_K length";
  table_->quantize_q8_k(x, n, out);
}

}  // namespace kvault::kernels
