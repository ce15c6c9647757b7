#include "core/stream_copy.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvault {
namespace {

// Every size around the 64-byte blocks, at aligned and unaligned
// destinations and sources: the bytes arrive, and nothing outside the
// destination range changes.
TEST(StreamCopyTest, CopiesExactlyTheBytesAtAnyAlignment) {
  std::vector<uint8_t> src(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  for (size_t dst_off : {0u, 1u, 16u, 17u, 48u}) {
    for (size_t src_off : {0u, 3u, 16u}) {
      for (size_t n : {0u, 1u, 15u, 63u, 64u, 65u, 128u, 1000u, 4096u}) {
        std::vector<uint8_t> dst(4096 + 128, 0xEE);
        // 64-byte aligned base, so dst_off picks the alignment.
        const uintptr_t base = reinterpret_cast<uintptr_t>(dst.data());
        const size_t pad = (64 - base % 64) % 64;
        uint8_t* to = dst.data() + pad + dst_off;
        CopyStreaming(to, src.data() + src_off, n);
        StreamingFence();
        for (size_t i = 0; i < dst.size(); ++i) {
          const uint8_t* at = dst.data() + i;
          const bool inside = at >= to && at < to + n;
          const uint8_t want = inside ? src[src_off + (at - to)] : 0xEE;
          ASSERT_EQ(dst[i], want) << "dst+" << dst_off << " src+" << src_off
                                  << " n " << n << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvault
