// Scalar reference kernels: the plainest correct code, used on CPUs without
// AVX2 and by the tests as the yardstick for the SIMD versions.
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/float16.h"
#include "kv/kv_dtype.h"
#include "model/ggml_dot_entries.h"
#include "model/kernels/kernel_table.h"
#include "model/kernels/quant_blocks.h"
#include "model/kernels/quant_scalar.h"

namespace kvault::kernels {
namespace {

float LoadHalfAsFloat(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return HalfToFloat(h);
}

float LoadBf16AsFloat(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float DotRowF32(const std::byte* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float wi;
    std::memcpy(&wi, w + 4 * i, sizeof(wi));
    sum += wi * x[i];
  }
  return sum;
}

float DotRowF16(const std::byte* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += LoadHalfAsFloat(w + 2 * i) * x[i];
  return sum;
}

float DotRowBf16(const std::byte* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += LoadBf16AsFloat(w + 2 * i) * x[i];
  return sum;
}

// Q4_0 weights (18-byte blocks: d, 16 bytes of nibble pairs) . Q8_0.
float DotRowQ4_0(const std::byte* w, const std::byte* x, int64_t n) {
  constexpr int64_t kQ4Bytes = 18;
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
    const std::byte* wb = w + b * kQ4Bytes;
    const std::byte* xb = x + b * kQ8_0BlockBytes;
    int32_t isum = 0;
    for (int i = 0; i < 16; ++i) {
      const int v = std::to_integer<int>(wb[2 + i]);
      isum += ((v & 0xF) - 8) * static_cast<int8_t>(xb[2 + i]);
      isum += ((v >> 4) - 8) * static_cast<int8_t>(xb[2 + 16 + i]);
    }
    // One fused step per block (the AVX-512 kernel's order, bit for bit).
    const float scale = LoadHalfAsFloat(wb) * LoadHalfAsFloat(xb);
    sum = std::fma(static_cast<float>(isum), scale, sum);
  }
  return sum;
}

template <float (*kDot)(const std::byte*, const float*, int64_t)>
void MatMulRowsFloat(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const float* x = reinterpret_cast<const float*>(a.x + t * a.x_row_bytes);
    for (int64_t r = row_begin; r < row_end; ++r) {
      a.y[t * a.y_stride + r] = kDot(a.w + r * a.w_row_bytes, x, a.cols);
    }
  }
}

template <float (*kDot)(const std::byte*, const std::byte*, int64_t)>
void MatMulRowsQuant(const MatMulArgs& a, int64_t row_begin, int64_t row_end) {
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const std::byte* x = a.x + t * a.x_row_bytes;
    for (int64_t r = row_begin; r < row_end; ++r) {
      a.y[t * a.y_stride + r] = kDot(a.w + r * a.w_row_bytes, x, a.cols);
    }
  }
}

// Q4_K / Q2_K: each token in its own order.
template <float (*kDot)(const std::byte*, const std::byte*, int64_t, DotOrder)>
void MatMulRowsOrdered(const MatMulArgs& a, int64_t row_begin,
                       int64_t row_end) {
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const std::byte* x = a.x + t * a.x_row_bytes;
    const DotOrder order = a.orders == nullptr ? DotOrder::kGemv : a.orders[t];
    for (int64_t r = row_begin; r < row_end; ++r) {
      a.y[t * a.y_stride + r] = kDot(a.w + r * a.w_row_bytes, x, a.cols, order);
    }
  }
}

// Row r of a WeightLayout::kGroups16 matrix (blocks of kBytes, the first
// kHead bytes kept row after row) gathered back into GGUF order in `row`.
template <int64_t kBytes, int64_t kHead>
void GatherGroups16Row(const MatMulArgs& a, int64_t r, std::byte* row) {
  const int64_t nb = static_cast<int64_t>(a.w_row_bytes) / kBytes;
  const std::byte* group = a.w + (r - r % 16) * a.w_row_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* unit = group + b * 16 * kBytes;
    std::byte* block = row + b * kBytes;
    std::memcpy(block, unit + (r % 16) * kHead, kHead);
    for (int64_t j = 0; j < (kBytes - kHead) / 4; ++j) {
      std::memcpy(block + kHead + 4 * j,
                  unit + 16 * kHead + 4 * (16 * j + r % 16), 4);
    }
  }
}

// kGroups16 weights: each row gathered, then kDot in the token's order.
template <int64_t kBytes, int64_t kHead,
          float (*kDot)(const std::byte*, const std::byte*, int64_t, DotOrder)>
void MatMulRowsGroups16(const MatMulArgs& a, int64_t row_begin,
                        int64_t row_end) {
  thread_local std::vector<std::byte> row;
  row.resize(a.w_row_bytes);
  for (int64_t r = row_begin; r < row_end; ++r) {
    GatherGroups16Row<kBytes, kHead>(a, r, row.data());
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const DotOrder order =
          a.orders == nullptr ? DotOrder::kGemv : a.orders[t];
      a.y[t * a.y_stride + r] =
          kDot(row.data(), a.x + t * a.x_row_bytes, a.cols, order);
    }
  }
}

// Q4_0 sums alike in both orders.
float DotRowQ4_0Ordered(const std::byte* w, const std::byte* x, int64_t n,
                        DotOrder) {
  return DotRowQ4_0(w, x, n);
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps,
             float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale =
      1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
}

float DotF32(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void Axpy(float a, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float DotF16F32(const std::byte* a, const float* b, int64_t n) {
  return DotRowF16(a, b, n);
}

void AxpyF16(float s, const std::byte* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * LoadHalfAsFloat(x + 2 * i);
}

void Exp(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}

constexpr KernelTable kScalarTable = {
    "scalar",
    {MatMulRowsFloat<DotRowF32>, MatMulRowsFloat<DotRowF16>,
     MatMulRowsFloat<DotRowBf16>, MatMulRowsQuant<DotQ8_0Q8_0>,
     MatMulRowsQuant<DotRowQ4_0>, MatMulRowsQuant<DotQ4_1Q8_1>,
     MatMulRowsQuant<DotQ5_0Q8_0>, MatMulRowsQuant<DotQ5_1Q8_1>,
     MatMulRowsQuant<DotIq4nlQ8_0>, MatMulRowsOrdered<DotQ2KQ8K>,
     MatMulRowsQuant<DotQ3KQ8K>, MatMulRowsOrdered<DotQ4KQ8K>,
     MatMulRowsQuant<DotQ5KQ8K>, MatMulRowsQuant<DotQ6KQ8K>,
     MatMulRowsQuant<DotIq4xsQ8K>,
     MatMulRowsGroups16<q4_k::kBytes, 0, DotQ4KQ8K>,
     MatMulRowsGroups16<18, 2, DotRowQ4_0Ordered>},
    RmsNorm,
    Softmax,
    SiluMul,
    DotF32,
    Axpy,
    DotF16F32,
    AxpyF16,
    QuantizeRowQ8_0Act,
    QuantizeRowQ8_1,
    QuantizeRowQ8_K,
    Exp,
    ggml_compat::dot::GemvPortable,
    ggml_compat::dot::Gemv2Portable,
    ggml_compat::dot::GemmRowsPortable,
    ggml_compat::dot::SwiGluPortable,
};

}  // namespace

const KernelTable* ScalarKernelTable() { return &kScalarTable; }

}  // namespace kvault::kernels
