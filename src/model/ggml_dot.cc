// The portable reference of ggml's float dot orders: explicit std::fma and
// plain float adds, one lane at a time. This file is compiled without FMA
// target attributes, so no a * b + c here is contracted into an FMA (the
// F32 tail must stay unfused).
#include "model/ggml_dot.h"

#include <cmath>

namespace kvault::ggml_compat::dot {
namespace {

// The AVX2 build's vec_dot reduction of 8 lanes (GGML_F32x8_REDUCE): lanes
// lo + hi, then two hadds.
float ReduceGemv8(const float* r) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = r[i] + r[i + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// tinyBLAS's hsum of 8 lanes: hi + lo halves, then lanes 0 + 2 and 1 + 3,
// then those two.
float Hsum8(const float* r) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = r[i + 4] + r[i];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// _mm512_reduce_add_ps as GCC 12 (which built llama.cpp) expands it: lanes
// i + (i+8), then i + (i+4), then (l0 + l2) + (l1 + l3). Both orders of the
// AVX-512 build end with it.
float Reduce16(const float* r) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = (r[i] + r[i + 8]) + (r[i + 4] + r[i + 12]);
  return (t[0] + t[2]) + (t[1] + t[3]);
}

}  // namespace

__attribute__((noinline)) float AddTail(float head, const std::byte* row,
                                        bool f16, const float* x, int64_t begin,
                                        int64_t end) {
  if (!f16) {
    float sum = head;
    for (int64_t c = begin; c < end; ++c) {
      sum = sum + WeightAt(row, f16, c) * x[c];
    }
    return sum;
  }
  double sum = head;
  for (int64_t c = begin; c < end; ++c) {
    sum += static_cast<double>(WeightAt(row, f16, c) * x[c]);
  }
  return static_cast<float>(sum);
}

float GemvPortable(const std::byte* row, bool f16, const float* x, int64_t k,
                   GgmlBuild build) {
  const int lanes = Lanes(build);
  const int64_t step = 4 * lanes;
  const int64_t np = k - k % step;
  float acc[4][16] = {};
  for (int64_t l = 0; l < np; l += step) {
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < lanes; ++i) {
        const int64_t c = l + lanes * j + i;
        acc[j][i] = std::fma(WeightAt(row, f16, c), x[c], acc[j][i]);
      }
    }
  }
  // Both builds first add accumulators 0 + 2 and 1 + 3, then the two.
  float r[16];
  for (int i = 0; i < lanes; ++i) {
    r[i] = (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i]);
  }
  const float head = lanes == 16 ? Reduce16(r) : ReduceGemv8(r);
  return WithTail(head, row, f16, x, np, k);
}

float GemmPortable(const std::byte* row, bool f16, const float* x, int64_t k,
                   GgmlBuild build) {
  const int lanes = Lanes(build);
  float acc[16] = {};
  for (int64_t l = 0; l < k; l += lanes) {
    for (int i = 0; i < lanes; ++i) {
      acc[i] = std::fma(WeightAt(row, f16, l + i), x[l + i], acc[i]);
    }
  }
  return lanes == 16 ? Reduce16(acc) : Hsum8(acc);
}

void Gemv2Portable(const std::byte* const* rows, bool f16, const float* x,
                   int64_t k, GgmlBuild build, float* y) {
  for (int i = 0; i < 2; ++i) y[i] = GemvPortable(rows[i], f16, x, k, build);
}

int64_t GemmRowsPortable(const kernels::GgmlGemmArgs&, int64_t r0, int64_t) {
  return r0;
}

int64_t SwiGluPortable(const float*, const float*, int64_t, GgmlBuild, float*) {
  return 0;
}

}  // namespace kvault::ggml_compat::dot
