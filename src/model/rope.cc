#include "model/rope.h"

#include <cmath>

namespace kvault {

RopeTable::RopeTable(std::span<const Pos> positions, uint32_t n_rot,
                     float freq_base, float freq_scale,
                     std::span<const float> freq_factors)
    : half_rot_(n_rot / 2),
      cos_(positions.size() * half_rot_),
      sin_(positions.size() * half_rot_) {
  const float theta_scale =
      std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  for (size_t t = 0; t < positions.size(); ++t) {
    float theta = static_cast<float>(positions[t]);
    for (uint32_t i = 0; i < half_rot_; ++i) {
      // ggml divides the pair's base angle by its factor, then scales.
      const float base = freq_factors.empty() ? theta : theta / freq_factors[i];
      const float angle = base * freq_scale;
      cos_[t * half_rot_ + i] = std::cos(angle);
      sin_[t * half_rot_ + i] = std::sin(angle);
      theta *= theta_scale;
    }
  }
}

void RopeTable::Apply(RopeStyle style, uint64_t token, float* x,
                      uint32_t num_heads, uint32_t head_dim) const {
  const float* c = &cos_[token * half_rot_];
  const float* s = &sin_[token * half_rot_];
  // Normal style pairs adjacent values; neox pairs the two halves.
  const uint32_t stride = style == RopeStyle::kNormal ? 2 : 1;
  const uint32_t partner = style == RopeStyle::kNormal ? 1 : half_rot_;
  for (uint32_t h = 0; h < num_heads; ++h) {
    float* head = x + uint64_t{h} * head_dim;
    for (uint32_t i = 0; i < half_rot_; ++i) {
      float* a = head + uint64_t{i} * stride;
      float* b = a + partner;
      const float x0 = *a;
      const float x1 = *b;
      // The FMAs GCC contracts ggml's rotation into (-ffp-contract=fast):
      // the first product fused, the second rounded (llama.cpp's logits
      // depend on it to the last bit).
      *a = std::fma(x0, c[i], -(x1 * s[i]));
      *b = std::fma(x0, s[i], x1 * c[i]);
    }
  }
}

}  // namespace kvault
