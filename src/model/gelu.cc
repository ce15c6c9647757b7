#include "model/gelu.h"

#include <cmath>
#include <vector>

#include "core/float16.h"
#include "model/portable_tanh.h"

namespace kvault {
namespace {

// The tanh approximation in float: 0.5 x (1 + tanh(sqrt(2/pi) x (1 +
// 0.044715 x^2))), the inner 1 + A x x fused as GCC compiles ggml's.
float GeluTanh(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x *
         (1.0f +
          PortableTanh(kSqrt2OverPi * x * std::fma(kCoefA * x, x, 1.0f)));
}

// table[h] = fp16(GeluTanh(fp16 value h)) for every fp16 bit pattern.
const std::vector<uint16_t>& Table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t h = 0; h < t.size(); ++h) {
      t[h] = FloatToHalf(GeluTanh(HalfToFloat(static_cast<uint16_t>(h))));
    }
    return t;
  }();
  return table;
}

}  // namespace

float GeluFp16Table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return HalfToFloat(Table()[FloatToHalf(x)]);
}

void GeGlu(const float* gate, const float* up, int64_t n, float* out) {
  const std::vector<uint16_t>& table = Table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      out[i] = 0.0f;
    } else if (x >= 10.0f) {
      out[i] = x * up[i];
    } else {
      out[i] = HalfToFloat(table[FloatToHalf(x)]) * up[i];
    }
  }
}

}  // namespace kvault
