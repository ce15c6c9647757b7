// AVX2 Q4_K MatMul of one token (decode) over WeightLayout::kGroups16
// with 8 rows in the lanes (see q4_k_lanes_avx2.cc for the scheme): each
// 16-row group's super-blocks streamed from memory in address order, one
// sequential stream with software prefetch, the nibbles unpacked as used
// (no L1 buffer round trip: nothing is shared with other tokens).
#include "model/kernels/kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <vector>

#include "model/kernels/kquant_kernels.h"
#include "model/kernels/q4_k_lanes_avx2.h"
#include "model/kernels/quant_blocks.h"

namespace kvault::kernels {
namespace q4k_avx2 {
namespace {

constexpr int64_t kPrefetchSbs = 3;  // group super-blocks ahead

// Units read from a kGroups16 half and unpacked as used (decode).
struct RawUnits {
  const std::byte* base;  // the half's dword 0; dword j at base + 64 j
  __m256i Raw(int u) const {
    return _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(base + 64 * (4 + u)));
  }
  __m256i Lo(int u) const {
    return _mm256_and_si256(Raw(u), _mm256_set1_epi8(0x0F));
  }
  __m256i Hi(int u) const {
    return _mm256_and_si256(_mm256_srli_epi16(Raw(u), 4),
                            _mm256_set1_epi8(0x0F));
  }
};

// One token over kGroups16 groups, the units streamed from memory.
void Groups16OneToken(const MatMulArgs& a, int64_t r0, int64_t r1) {
  const int64_t nb = a.cols / kBlockK;
  thread_local std::vector<TokenSb> tok;
  tok.resize(nb);
  PackTokenSbs(a, 0, tok.data());
  const bool gemm = IsGemm(a, 0);
  for (; r0 < r1; r0 += kGroupRows) {
    const std::byte* group = a.w + r0 * a.w_row_bytes;
    Acc acc[2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()},
                  {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* unit = group + b * kGroupSbBytes;
      // One sequential stream (the next group follows this one).
      const char* ahead =
          reinterpret_cast<const char*>(unit + kPrefetchSbs * kGroupSbBytes);
#pragma GCC unroll 36
      for (int line = 0; line < kGroupSbBytes / 64; ++line) {
        _mm_prefetch(ahead + 64 * line, _MM_HINT_T0);
      }
      const std::byte* xq = a.x + b * q8_k::kBytes + q8_k::kQs;
      const TokenSb* ts = &tok[b];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i head[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          head[j] = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(unit + 32 * h + 64 * j));
        }
        SbScales s;
        UnpackScales(head, &s);
        Acc* ac = &acc[h];
        StepSb<1>(RawUnits{unit + 32 * h}, s, &xq, &ts, &gemm, &ac);
      }
    }
    StoreRows(a, 0, r0, kLanes, acc[0]);
    StoreRows(a, 0, r0 + kLanes, kLanes, acc[1]);
  }
}

}  // namespace
}  // namespace q4k_avx2

void MatMulRowsQ4KGroups16DecodeAvx2(const MatMulArgs& a, int64_t row_begin,
                                     int64_t row_end) {
  q4k_avx2::Groups16OneToken(a, row_begin, row_end);
}

}  // namespace kvault::kernels

#endif
