// How many prompt tokens a step may prefill while other slots generate.
//
// A generating slot gets one token per step, so its inter-token latency is
// the step's time; a long prompt fed in fixed chunks makes each of those
// steps many times longer (a 256-token chunk at depth 2,000 was 2 s with
// the small model). The pacer bounds the prefill work a step carries so
// that its time stays near (1 + share) x the time of a step without it.
//
// Costs are learned from the steps themselves (so they hold for any model
// and machine): a step without prefill gives the base time; a step
// with prefill gives ns per unit of prefill work, where n prompt tokens at
// depth d (cells already cached) cost n * (token_cells + d + (n - 1) / 2)
// units: each token's matmuls (token_cells, in attended-cell equivalents
// from the model's shape) plus the cells its attention visits, which grow
// with depth. The budget is the largest n whose predicted time fits. Both
// estimates are medians of the last kWindow measurements: on a shared
// machine a step now and then takes twice as long for reasons of its own
// (a compute thread descheduled), which a mean would charge to prefill.
#ifndef KVAULT_ENGINE_PREFILL_PACER_H_
#define KVAULT_ENGINE_PREFILL_PACER_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvault {

class PrefillPacer {
 public:
  // share: prefill time allowed per step, as a fraction of a step without
  // prefill (0: no pacing); token_cells: see above.
  PrefillPacer(double share, double token_cells);

  // Units of prefill work of n tokens at depth `depth`.
  double Units(size_t n, size_t depth) const;

  // Records a finished step: its wall time, whether it had decode tokens,
  // and the prefill units it carried (0: none).
  void Observe(double step_ns, bool had_decode, double prefill_units);

  // Returns the prompt tokens (1..max_tokens) a slot at `depth` may feed
  // in a step that also decodes, within `*allowance_ns` of prefill time,
  // and deducts their predicted time from it. Without pacing, or before
  // any step was measured, returns max_tokens (at most kProbeTokens while
  // learning) and leaves the allowance alone.
  size_t Take(size_t depth, size_t max_tokens, double* allowance_ns) const;

  // The prefill time one decoding step may carry (share x base time);
  // infinite while no decode-only step was measured.
  double AllowanceNs() const;

  // Whether Take paces (a share was set).
  bool enabled() const { return share_ > 0; }

  // Tokens fed while learning the cost per unit: few, so the first step
  // cannot stall the others for long.
  static constexpr size_t kProbeTokens = 2;
  // Measurements each estimate is the median of.
  static constexpr size_t kWindow = 15;

 private:
  // The last kWindow samples of one quantity; Median() is 0 when empty.
  class Recent {
   public:
    void Add(double sample);
    double Median() const;

   private:
    std::array<double, kWindow> samples_{};
    size_t count_ = 0;  // samples added, all time
  };

  double share_;
  double token_cells_;
  Recent base_ns_;      // a step without prefill
  Recent ns_per_unit_;  // prefill time per unit
};

// The matmul work of one token in attended-cell units for a model of this
// shape: weights per layer / (n_head * (head_dim_k + head_dim_v)), the
// flops of one token's matmuls over those of attending one cell.
double TokenCellsForShape(uint64_t weights_per_layer, uint32_t n_head,
                          uint32_t head_dim_k, uint32_t head_dim_v);

}  // namespace kvault

#endif  // KVAULT_ENGINE_PREFILL_PACER_H_
