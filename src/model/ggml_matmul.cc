// ggml_compat::MatMul: which order each token takes, the split of rows over
// threads, and the choice among the forms of ggml_dot.h (all of which give
// the portable form's bits).
#include <algorithm>
#include <vector>

#include "core/float16.h"
#include "model/ggml_compat.h"
#include "model/ggml_dot.h"
#include "model/kernels/compute_pool.h"

namespace kvault::ggml_compat {
namespace {

// A matrix product's fixed arguments.
struct Product {
  kernels::MatrixView w;
  const float* x;  // [tokens, w.cols]; fp16-exact for F16 weights
  GgmlBuild build;
  const kernels::KernelTable* table;  // the set whose forms run
  float* y;                           // [tokens, w.rows]
};

// y[i] = the kGemv of rows[i] (i < num_rows <= 2) with x.
void GemvRowsAtOnce(const Product& p, const std::byte* const* rows,
                    int num_rows, const float* x, float* y) {
  const bool f16 = p.w.type == GgmlType::kF16;
  if (num_rows == 2) {
    p.table->ggml_gemv2(rows, f16, x, p.w.cols, p.build, y);
  } else {
    y[0] = p.table->ggml_gemv(rows[0], f16, x, p.w.cols, p.build);
  }
}

// y[t, r] for rows [r0, r1) and the tokens listed in gemv (kGemv order).
// Row r is paired with r + half: rows next to each other (often 4 KiB
// apart) read as two streams measured ~35 % slower than rows far apart.
void GemvRows(const Product& p, std::span<const uint32_t> gemv, int64_t r0,
              int64_t r1) {
  const kernels::MatrixView& w = p.w;
  const int64_t half = (r1 - r0) / 2;
  for (int64_t r = r0; r < r0 + half; ++r) {
    const std::byte* rows[2] = {w.data + r * w.row_bytes,
                                w.data + (r + half) * w.row_bytes};
    for (uint32_t t : gemv) {
      float pair[2];
      GemvRowsAtOnce(p, rows, 2, p.x + t * w.cols, pair);
      p.y[t * w.rows + r] = pair[0];
      p.y[t * w.rows + r + half] = pair[1];
    }
  }
  for (int64_t r = r0 + 2 * half; r < r1; ++r) {
    const std::byte* row = w.data + r * w.row_bytes;
    for (uint32_t t : gemv) {
      GemvRowsAtOnce(p, &row, 1, p.x + t * w.cols, &p.y[t * w.rows + r]);
    }
  }
}

// y[t, r] for rows [r0, r1) and the tokens listed in gemm (kGemm order).
void GemmRows(const Product& p, std::span<const uint32_t> gemm, int64_t r0,
              int64_t r1) {
  const kernels::GgmlGemmArgs args{&p.w,        p.x,     gemm.data(),
                                   gemm.size(), p.build, p.y};
  r0 = p.table->ggml_gemm_rows(args, r0, r1);
  const kernels::MatrixView& w = p.w;
  const bool f16 = w.type == GgmlType::kF16;
  for (int64_t r = r0; r < r1; ++r) {
    const std::byte* row = w.data + r * w.row_bytes;
    for (uint32_t t : gemm) {
      p.y[t * w.rows + r] =
          dot::GemmPortable(row, f16, p.x + t * w.cols, w.cols, p.build);
    }
  }
}

// x rounded to fp16 (as ggml converts activations for F16 weights), one
// row of k values per token.
std::vector<float> RoundedToHalf(const float* x, size_t num_tokens, int64_t k) {
  std::vector<float> rounded(num_tokens * k);
  std::vector<std::byte> half(2 * k);
  for (size_t t = 0; t < num_tokens; ++t) {
    FloatToHalfRow(std::span(x + t * k, k), half);
    HalfToFloatRow(half, std::span(&rounded[t * k], k));
  }
  return rounded;
}

}  // namespace

bool Supports(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16;
}

void MatMul(const kernels::MatrixView& w, const float* x,
            std::span<const DotOrder> order, float* y, GgmlBuild build,
            kernels::Isa isa, kernels::ComputePool* pool) {
  const int64_t k = w.cols;
  std::vector<float> rounded;  // [num_tokens, k]
  if (w.type == GgmlType::kF16) {
    rounded = RoundedToHalf(x, order.size(), k);
    x = rounded.data();
  }
  const bool gemm_serves = dot::GemmServes(build, w.rows, k);
  std::vector<uint32_t> gemv, gemm;
  for (size_t t = 0; t < order.size(); ++t) {
    const bool tiled = order[t] == DotOrder::kGemm && gemm_serves;
    (tiled ? gemm : gemv).push_back(static_cast<uint32_t>(t));
  }
  const Product product{w, x, build, &dot::TableFor(isa), y};
  constexpr int64_t kRowsPerTask = 64;  // a multiple of the 8-row tiles
  const size_t num_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  auto task = [&](size_t i) {
    const int64_t r0 = static_cast<int64_t>(i) * kRowsPerTask;
    const int64_t r1 = std::min(w.rows, r0 + kRowsPerTask);
    if (!gemv.empty()) GemvRows(product, gemv, r0, r1);
    if (!gemm.empty()) GemmRows(product, gemm, r0, r1);
  };
  // Below this many multiply-adds one thread is faster than handing out
  // tasks; the split never changes a result.
  constexpr int64_t kMinParallelWork = 1 << 16;
  const int64_t work = w.rows * k * static_cast<int64_t>(order.size());
  if (pool == nullptr || num_tasks < 2 || work < kMinParallelWork) {
    for (size_t i = 0; i < num_tasks; ++i) task(i);
  } else {
    pool->ParallelFor(num_tasks, task);
  }
}

float DotF16(const std::byte* k, const float* q, int64_t n, GgmlBuild build,
             kernels::Isa isa) {
  return dot::TableFor(isa).ggml_gemv(k, /*f16=*/true, q, n, build);
}

}  // namespace kvault::ggml_compat
