// ComputeBackend: what a forward pass computes with, in one object: the
// instruction set of both matmul stacks (ggml_compat for F32/F16 weights,
// kernels/ for quantized ones) and of the vector kernels, the worker
// threads its loops run on, and the numerics mode (which llama.cpp build's
// float results it reproduces). Its options are decided once, at start-up
// (ComputeBackendOptions::FromEnvironment in the apps), and passed down:
// nothing under it reads the environment or a global setting, so two
// backends with different options can run side by side.
#ifndef KVAULT_MODEL_COMPUTE_BACKEND_H_
#define KVAULT_MODEL_COMPUTE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "model/ggml_compat.h"
#include "model/kernels/compute_pool.h"
#include "model/kernels/kernels.h"

namespace kvault {

struct ComputeBackendOptions {
  // Threads a parallel loop runs on, the calling thread included (1: no
  // worker threads).
  uint32_t num_threads = 1;
  // The instruction set of every kernel; one of kernels::SupportedIsas().
  // Any set gives F32/F16 models the same bits (ggml_compat's forms do).
  kernels::Isa isa = kernels::BestIsa();
  // Whether the F32/F16 stack may use its AVX-512 forms when isa is kAvx512
  // (the AVX2 forms' bits, faster; tests compare the two).
  bool ggml_avx512 = true;
  // The numerics mode: the llama.cpp build whose float results the forward
  // pass reproduces where builds differ (ggml_compat::GgmlBuild).
  ggml_compat::GgmlBuild ggml_build = ggml_compat::NativeGgmlBuild();
  // Whether idle workers spin for a while before sleeping (ComputePool).
  bool spin_workers = true;

  // Returns the defaults with the environment's choices:
  // KVAULT_COMPUTE_POOL=off clears spin_workers. (KVAULT_KERNELS, e.g. avx2
  // to measure the AVX2 path on an AVX-512 machine, caps the CPU features
  // in use at the one detection site, core/cpu_features.h, so isa and
  // ggml_build default to that level.) Call once at start-up.
  static ComputeBackendOptions FromEnvironment();
};

class ComputeBackend {
 public:
  // Starts options.num_threads - 1 worker threads. Requires options.isa in
  // kernels::SupportedIsas() and options.num_threads >= 1.
  explicit ComputeBackend(const ComputeBackendOptions& options = {});
  ComputeBackend(const ComputeBackend&) = delete;
  ComputeBackend& operator=(const ComputeBackend&) = delete;

  // Returns the options it was built with.
  const ComputeBackendOptions& options() const { return options_; }
  // Returns the kernels of options().isa.
  const kernels::Kernels& kernels() const { return kernels_; }

  // y[t, r] = W[r] . x[t] for t < orders.size(), r < w.rows: F32/F16
  // weights in the options' ggml_build's orders (ggml_compat::MatMul),
  // others with the quantized kernels (Kernels::MatMul), each token in
  // orders[t]. x: [num_tokens, w.cols]; y: [num_tokens, w.rows]. Rows are
  // split over the threads; no result depends on the split.
  void MatMul(const kernels::MatrixView& w, const float* x,
              std::span<const kernels::DotOrder> orders, float* y) const;
  // out[i] = silu(gate[i]) * up[i] in the numerics mode's form
  // (ggml_compat::SwiGlu); `out` may alias gate or up.
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) const;
  // Returns ggml_compat::DotF16(k, q, n) in the options' ggml_build order:
  // an F16 K row times a query.
  float DotF16(const std::byte* k, const float* q, int64_t n) const;
  // Calls fn(i) for every i < n on the workers and the calling thread (on
  // the caller alone without workers); returns when every call has.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn) const;

 private:
  ComputeBackendOptions options_;
  kernels::Kernels kernels_;
  // The F32/F16 stack's set: options_.isa, or kAvx2 without ggml_avx512.
  kernels::Isa ggml_isa_;
  std::unique_ptr<kernels::ComputePool> pool_;  // null: single-threaded
};

}  // namespace kvault

#endif  // KVAULT_MODEL_COMPUTE_BACKEND_H_
