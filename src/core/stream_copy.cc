#include "core/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2: part of every x86-64 CPU
#endif

namespace kvault {

void CopyStreaming(void* dst, const void* src, size_t num_bytes) {
#if defined(__x86_64__)
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    auto* d = static_cast<__m128i*>(dst);
    const auto* s = static_cast<const __m128i*>(src);
    const size_t num_lines = num_bytes / 64;  // 4 stores per cache line
    for (size_t i = 0; i < num_lines; ++i, d += 4, s += 4) {
      const __m128i a = _mm_loadu_si128(s);
      const __m128i b = _mm_loadu_si128(s + 1);
      const __m128i c = _mm_loadu_si128(s + 2);
      const __m128i e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    const size_t done = num_lines * 64;
    std::memcpy(static_cast<std::byte*>(dst) + done,
                static_cast<const std::byte*>(src) + done, num_bytes - done);
    return;
  }
#endif
  std::memcpy(dst, src, num_bytes);
}

void StreamingFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace kvault
