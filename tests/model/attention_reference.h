// attention.cc's generic AttendGroup for an F16 cache, restated operation
// for operation for the attention tests: the same q . k
// (ggml_compat::DotF16), fused V update and sum, and fp16 rounding
// (HalfToFloat(FloatToHalf(x)), which attention.cc's RoundToHalf matches).
#ifndef KVAULT_TESTS_MODEL_ATTENTION_REFERENCE_H_
#define KVAULT_TESTS_MODEL_ATTENTION_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/float16.h"
#include "kv/kv_storage.h"
#include "model/attention.h"
#include "model/ggml_compat.h"

namespace kvault {

inline float RoundHalf(float x) { return HalfToFloat(FloatToHalf(x)); }

// out[j] ([n_gqa, dv]) for query heads q[j] ([n_gqa, dk]) of KV head g
// over seq's cells with positions <= query_pos, one cell at a time, q . k
// in `build`'s order.
inline void ReferenceGroup(const KvStorage& storage, uint32_t layer,
                           const AttentionShape& s, const SeqCells& seq,
                           Pos query_pos, uint32_t g, const float* q,
                           float* out, ggml_compat::GgmlBuild build) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  const uint32_t dv = s.head_dim_v;
  std::vector<float> qs(q, q + uint64_t{n_gqa} * dk);  // [n_gqa, dk]
  for (float& x : qs) x = RoundHalf(x);
  std::vector<float> max(n_gqa, -INFINITY);
  std::vector<float> sum(n_gqa, 0.0f);
  std::fill(out, out + uint64_t{n_gqa} * dv, 0.0f);
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    if (seq.positions[i] > query_pos) continue;
    const std::byte* k = storage.Rows(KvSide::kK, layer, seq.cells[i]).data() +
                         uint64_t{g} * dk * 2;
    const std::byte* v = storage.Rows(KvSide::kV, layer, seq.cells[i]).data() +
                         uint64_t{g} * dv * 2;
    for (uint32_t j = 0; j < n_gqa; ++j) {
      float* acc = out + uint64_t{j} * dv;
      const float score = ggml_compat::DotF16(k, &qs[uint64_t{j} * dk], dk,
                                              build, kernels::Isa::kScalar) *
                          s.scale;
      float old_scale = 1.0f, weight = 1.0f;
      if (score > max[j]) {
        old_scale = std::exp(max[j] - score);
        max[j] = score;
        for (uint32_t d = 0; d < dv; ++d) {
          acc[d] = RoundHalf(acc[d] * old_scale);
        }
      } else {
        weight = std::exp(score - max[j]);
      }
      for (uint32_t d = 0; d < dv; ++d) {
        uint16_t h;
        std::memcpy(&h, v + 2 * uint64_t{d}, 2);
        acc[d] = RoundHalf(std::fma(weight, HalfToFloat(h), acc[d]));
      }
      sum[j] = std::fma(sum[j], old_scale, weight);
    }
  }
  for (uint32_t j = 0; j < n_gqa; ++j) {
    const float inv = sum[j] == 0.0f ? 0.0f : 1.0f / sum[j];
    for (uint32_t d = 0; d < dv; ++d) out[uint64_t{j} * dv + d] *= inv;
  }
}

}  // namespace kvault

#endif  // KVAULT_TESTS_MODEL_ATTENTION_REFERENCE_H_
