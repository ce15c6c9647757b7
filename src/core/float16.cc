#include "core/float16.h"

#include <bit>
#include <cstring>

#include "core/check.h"
#include "core/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVAULT_HAVE_F16C_PATH 1
#endif

namespace kvault {
namespace {

static_assert(std::endian::native == std::endian::little,
              "half rows are stored little-endian");

constexpr uint32_t kF32AbsMask = 0x7FFFFFFF;
constexpr uint32_t kF32Inf = 0x7F800000;
// Smallest float that rounds to half infinity: 65520 = 65504 + half an ulp,
// a tie that goes to the even neighbour 2^16.
constexpr uint32_t kF32HalfOverflow = 0x477FF000;
// 2^-14, the smallest normal half.
constexpr uint32_t kF32HalfMinNormal = 0x38800000;
// 2^-25, half the smallest subnormal half: at or below it rounds to zero.
constexpr uint32_t kF32HalfUnderflow = 0x33000000;
// (127 - 15) << 23: moves the exponent bias from float's to half's.
constexpr uint32_t kRebias = 0x38000000;

// Rounds the 24-bit significand `mant` right by `shift` bits, ties to even.
uint32_t ShiftRoundEven(uint32_t mant, uint32_t shift) {
  const uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1))) ? q + 1 : q;
}

uint16_t LoadHalf(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

#ifdef KVAULT_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) void FloatToHalfRowF16c(const float* src,
                                                            std::byte* dst,
                                                            size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = FloatToHalf(src[i]);
    std::memcpy(dst + 2 * i, &h, sizeof(h));
  }
}

__attribute__((target("avx,f16c"))) void HalfToFloatRowF16c(
    const std::byte* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = HalfToFloat(LoadHalf(src + 2 * i));
}

#endif

}  // namespace

uint16_t FloatToHalf(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & kF32AbsMask;
  if (abs > kF32Inf) {  // NaN: quiet it, keep the top 10 payload bits.
    return sign | 0x7E00 | ((abs >> 13) & 0x3FF);
  }
  if (abs >= kF32HalfOverflow) return sign | 0x7C00;
  if (abs >= kF32HalfMinNormal) {
    // Adding 0xFFF plus the kept lsb rounds ties to even; a carry out of the
    // mantissa correctly bumps the exponent.
    const uint32_t m = abs - kRebias;
    return sign | static_cast<uint16_t>((m + 0xFFF + ((m >> 13) & 1)) >> 13);
  }
  if (abs <= kF32HalfUnderflow) return sign;
  // Subnormal half: units of 2^-24. A float in [2^-25, 2^-14) has biased
  // exponent e in [102, 112] and value mant * 2^(e - 150).
  const uint32_t e = abs >> 23;
  const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
  return sign | static_cast<uint16_t>(ShiftRoundEven(mant, 126 - e));
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exp = (half >> 10) & 0x1F;
  uint32_t mant = half & 0x3FF;
  if (exp == 0x1F) {
    const uint32_t quiet = mant != 0 ? 0x400000 : 0;  // F16C quiets sNaNs.
    return std::bit_cast<float>(sign | kF32Inf | quiet | (mant << 13));
  }
  if (exp != 0) {
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal half: normalise; 113 is the float exponent of 2^-14.
  uint32_t e = 113;
  while ((mant & 0x400) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3FF) << 13));
}

void FloatToHalfRowPortable(std::span<const float> src,
                            std::span<std::byte> dst) {
  KV_CHECK_EQ(dst.size(), 2 * src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const uint16_t h = FloatToHalf(src[i]);
    std::memcpy(dst.data() + 2 * i, &h, sizeof(h));
  }
}

void HalfToFloatRowPortable(std::span<const std::byte> src,
                            std::span<float> dst) {
  KV_CHECK_EQ(src.size(), 2 * dst.size());
  for (size_t i = 0; i < dst.size(); ++i) {
    dst[i] = HalfToFloat(LoadHalf(src.data() + 2 * i));
  }
}

bool Float16UsesF16c() {
#ifdef KVAULT_HAVE_F16C_PATH
  return CpuFeaturesInUse().f16c;
#else
  return false;
#endif
}

void FloatToHalfRow(std::span<const float> src, std::span<std::byte> dst) {
#ifdef KVAULT_HAVE_F16C_PATH
  if (Float16UsesF16c()) {
    KV_CHECK_EQ(dst.size(), 2 * src.size());
    FloatToHalfRowF16c(src.data(), dst.data(), src.size());
    return;
  }
#endif
  FloatToHalfRowPortable(src, dst);
}

void HalfToFloatRow(std::span<const std::byte> src, std::span<float> dst) {
#ifdef KVAULT_HAVE_F16C_PATH
  if (Float16UsesF16c()) {
    KV_CHECK_EQ(src.size(), 2 * dst.size());
    HalfToFloatRowF16c(src.data(), dst.data(), dst.size());
    return;
  }
#endif
  HalfToFloatRowPortable(src, dst);
}

}  // namespace kvault
