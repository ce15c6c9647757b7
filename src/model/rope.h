// Rotary position embedding as ggml computes it (ext_factor 0, mscale 1):
// pair i of a head (i < n_rot / 2) is rotated by
//   theta_i = (pos * freq_base^(-2i / n_rot) / factor_i) * freq_scale,
// where freq_scale = 1 / (linear scaling factor) and factor_i is the
// model's per-pair frequency factor (Llama 3.1's rope_freqs.weight) or 1. The
// angle is accumulated in float exactly as ggml_rope does (theta *= theta_scale
// per pair) so results match llama.cpp to the last bits where libm agrees; the
// rotation uses the FMAs of llama.cpp's GCC build. Dimensions from n_rot on are
// left unrotated.
#ifndef KVAULT_MODEL_ROPE_H_
#define KVAULT_MODEL_ROPE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "model/arch_spec.h"

namespace kvault {

class RopeTable {
 public:
  // Precomputes cos/sin for every position in `positions` (one per batch
  // token). n_rot must be even; `freq_factors` is empty or holds n_rot / 2
  // divisors of the pairs' angles (ggml_rope_ext's freq_factors).
  RopeTable(std::span<const Pos> positions, uint32_t n_rot, float freq_base,
            float freq_scale, std::span<const float> freq_factors = {});

  // Rotates `num_heads` consecutive heads of `head_dim` values at x (the
  // Q or K row of batch token `token`) in place.
  void Apply(RopeStyle style, uint64_t token, float* x, uint32_t num_heads,
             uint32_t head_dim) const;

 private:
  uint32_t half_rot_;       // n_rot / 2
  std::vector<float> cos_;  // [num_tokens, half_rot_]
  std::vector<float> sin_;  // [num_tokens, half_rot_]
};

}  // namespace kvault

#endif  // KVAULT_MODEL_ROPE_H_
