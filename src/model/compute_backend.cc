#include "model/compute_backend.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/log.h"

namespace kvault {
ComputeBackendOptions ComputeBackendOptions::FromEnvironment() {
  // KVAULT_KERNELS needs no reading here: it caps the CPU features in use
  // (core/cpu_features.h), which the default isa already follows.
  ComputeBackendOptions options;
  const char* pool = std::getenv("KVAULT_COMPUTE_POOL");
  options.spin_workers = pool == nullptr || std::string_view(pool) != "off";
  return options;
}

ComputeBackend::ComputeBackend(const ComputeBackendOptions& options)
    : options_(options),
      kernels_(options.isa),
      ggml_isa_(options.isa == kernels::Isa::kAvx512 && !options.ggml_avx512
                    ? kernels::Isa::kAvx2
                    : options.isa) {
  KV_CHECK_GE(options.num_threads, 1u) << "a ComputeBackend needs a thread";
  if (options.num_threads > 1) {
    pool_ = std::make_unique<kernels::ComputePool>(options.num_threads - 1,
                                                   options.spin_workers);
  }
}

void ComputeBackend::MatMul(const kernels::MatrixView& w, const float* x,
                            std::span<const kernels::DotOrder> orders,
                            float* y) const {
  if (ggml_compat::Supports(w.type)) {
    ggml_compat::MatMul(w, x, orders, y, options_.ggml_build, ggml_isa_,
                        pool_.get());
    return;
  }
  kernels_.MatMul(w, x, static_cast<int64_t>(orders.size()), y, pool_.get(),
                  orders);
}

void ComputeBackend::SwiGlu(const float* gate, const float* up, int64_t n,
                            float* out) const {
  ggml_compat::SwiGlu(gate, up, n, options_.ggml_build, ggml_isa_, out);
}

float ComputeBackend::DotF16(const std::byte* k, const float* q,
                             int64_t n) const {
  return ggml_compat::DotF16(k, q, n, options_.ggml_build, ggml_isa_);
}

void ComputeBackend::ParallelFor(size_t n,
                                 const std::function<void(size_t)>& fn) const {
  if (pool_ == nullptr) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool_->ParallelFor(n, fn);
}

}  // namespace kvault
