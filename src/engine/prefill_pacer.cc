#include "engine/prefill_pacer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvault {
void PrefillPacer::Recent::Add(double sample) {
  samples_[count_++ % kWindow] = sample;
}

double PrefillPacer::Recent::Median() const {
  const size_t n = std::min(count_, kWindow);
  if (n == 0) return 0;
  std::array<double, kWindow> sorted = samples_;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.begin() + n);
  return sorted[n / 2];
}

PrefillPacer::PrefillPacer(double share, double token_cells)
    : share_(share), token_cells_(std::max(token_cells, 1.0)) {}

double PrefillPacer::Units(size_t n, size_t depth) const {
  const double tokens = static_cast<double>(n);
  return tokens * (token_cells_ + static_cast<double>(depth) +
                   (tokens - 1) / 2);
}

void PrefillPacer::Observe(double step_ns, bool had_decode,
                           double prefill_units) {
  if (!(step_ns > 0)) return;
  if (prefill_units <= 0) {
    if (had_decode) base_ns_.Add(step_ns);
    return;
  }
  // The decode tokens' share of a mixed step is the base time; a step of
  // prefill alone is all prefill. Noise can leave little: keep a floor.
  const double base = base_ns_.Median();
  const double prefill_ns = had_decode && base > 0
                                ? std::max(step_ns - base, 0.1 * step_ns)
                                : step_ns;
  ns_per_unit_.Add(prefill_ns / prefill_units);
}

double PrefillPacer::AllowanceNs() const {
  const double base = base_ns_.Median();
  if (base == 0) return std::numeric_limits<double>::infinity();
  return share_ * base;
}

size_t PrefillPacer::Take(size_t depth, size_t max_tokens,
                          double* allowance_ns) const {
  if (!enabled() || max_tokens == 0) return max_tokens;
  const double ns_per_unit = ns_per_unit_.Median();
  if (ns_per_unit == 0 || !std::isfinite(*allowance_ns)) {
    return std::min(max_tokens, kProbeTokens);
  }
  // Largest n with n * (b + n / 2) <= u, b = token_cells + depth - 1/2.
  const double u = std::max(*allowance_ns, 0.0) / ns_per_unit;
  const double b = token_cells_ + static_cast<double>(depth) - 0.5;
  const double root = std::sqrt(b * b + 2 * u) - b;
  const size_t n = std::clamp<size_t>(
      static_cast<size_t>(std::max(root, 0.0)), 1, max_tokens);
  *allowance_ns -= Units(n, depth) * ns_per_unit;
  return n;
}

double TokenCellsForShape(uint64_t weights_per_layer, uint32_t n_head,
                          uint32_t head_dim_k, uint32_t head_dim_v) {
  const double per_cell = static_cast<double>(n_head) *
                          (static_cast<double>(head_dim_k) + head_dim_v);
  return per_cell > 0 ? static_cast<double>(weights_per_layer) / per_cell
                      : 1.0;
}

}  // namespace kvault
