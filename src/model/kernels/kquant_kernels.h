// MatMul kernels defined outside kernels_avx512.cc / kernels_avx2.cc (the
// K-quants in kquants_avx512.cc and the *_lanes_avx2.cc files, Q4_0 and Q4_K
// with 16 rows in the lanes), declared for those files' tables. Declarations
// only (see kernel_table.h).
#ifndef KVAULT_MODEL_KERNELS_KQUANT_KERNELS_H_
#define KVAULT_MODEL_KERNELS_KQUANT_KERNELS_H_

#include <cstdint>

#include "model/kernels/kernel_table.h"

namespace kvault::kernels {

// Row kernels (MatMulRowsFn) for weights of each K type (and IQ4_XS) against
// Q8_K activations; defined only in builds with AVX-512 VNNI.
void MatMulRowsQ2KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
void MatMulRowsQ3KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
void MatMulRowsQ4KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
// Q4_K one row at a time (kquants_avx512.cc) and 16 rows in the lanes
// (q4_k_lanes_avx512.cc); MatMulRowsQ4KAvx512 picks between them.
void MatMulRowsQ4KPerRowAvx512(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end);
void MatMulRowsQ4KLanesAvx512(const MatMulArgs& a, int64_t row_begin,
                              int64_t row_end);
// Q4_K in WeightLayout::kGroups16 (rows a multiple of 16).
void MatMulRowsQ4KGroups16Avx512(const MatMulArgs& a, int64_t row_begin,
                                 int64_t row_end);
void MatMulRowsQ5KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
void MatMulRowsQ6KAvx512(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
void MatMulRowsIq4xsAvx512(const MatMulArgs& a, int64_t row_begin,
                           int64_t row_end);
// Q8_K activations as QuantizeRowQ8_K makes them, bit for bit.
void QuantizeRowQ8_KAvx512(const float* x, int64_t n, std::byte* out);
// Q4_0 against Q8_0 with 16 rows in the lanes (q4_0_lanes_avx512.cc).
void MatMulRowsQ4_0LanesAvx512(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end);
// Q4_0 in WeightLayout::kGroups16 (rows a multiple of 16).
void MatMulRowsQ4_0Groups16Avx512(const MatMulArgs& a, int64_t row_begin,
                                  int64_t row_end);

// The same weight kinds with AVX2, 8 rows in the lanes (q2_k_lanes_avx2.cc,
// q3_k_lanes_avx2.cc, q5_k_lanes_avx2.cc, iq4_xs_lanes_avx2.cc on
// k_lanes8_avx2.h's driver), for kernels_avx2.cc.
void MatMulRowsQ2KAvx2(const MatMulArgs& a, int64_t row_begin, int64_t row_end);
void MatMulRowsQ3KAvx2(const MatMulArgs& a, int64_t row_begin, int64_t row_end);
// Q4_K with 8 rows in the lanes (q4_k_lanes_avx2.cc): kRows, and
// WeightLayout::kGroups16 (rows a multiple of 16).
void MatMulRowsQ4KAvx2(const MatMulArgs& a, int64_t row_begin, int64_t row_end);
void MatMulRowsQ4KGroups16Avx2(const MatMulArgs& a, int64_t row_begin,
                               int64_t row_end);
// Its one-token path (q4_k_decode_avx2.cc).
void MatMulRowsQ4KGroups16DecodeAvx2(const MatMulArgs& a, int64_t row_begin,
                                     int64_t row_end);
void MatMulRowsQ5KAvx2(const MatMulArgs& a, int64_t row_begin, int64_t row_end);
// Q6_K with 8 rows in the lanes (q6_k_lanes_avx2.cc).
void MatMulRowsQ6KAvx2(const MatMulArgs& a, int64_t row_begin, int64_t row_end);
void MatMulRowsIq4xsAvx2(const MatMulArgs& a, int64_t row_begin,
                         int64_t row_end);
// Q4_0 with 8 rows in the lanes (q4_0_lanes_avx2.cc): kRows, and
// WeightLayout::kGroups16 (rows a multiple of 16).
void MatMulRowsQ4_0LanesAvx2(const MatMulArgs& a, int64_t row_begin,
                             int64_t row_end);
void MatMulRowsQ4_0Groups16Avx2(const MatMulArgs& a, int64_t row_begin,
                                int64_t row_end);
// IQ4_NL with 8 rows in the lanes (q4_0_lanes_avx2.cc, kRows).
void MatMulRowsIq4nlLanesAvx2(const MatMulArgs& a, int64_t row_begin,
                              int64_t row_end);
// Q8_K activations as QuantizeRowQ8_K makes them, bit for bit
// (q8_k_quantize_avx2.cc).
void QuantizeRowQ8_KAvx2(const float* x, int64_t n, std::byte* out);
// Q4_1, Q5_0 and Q5_1 with AVX2 (legacy_quants_avx2.cc).
void MatMulRowsQ4_1Avx2(const MatMulArgs& a, int64_t row_begin,
                        int64_t row_end);
void MatMulRowsQ5_0Avx2(const MatMulArgs& a, int64_t row_begin,
                        int64_t row_end);
void MatMulRowsQ5_1Avx2(const MatMulArgs& a, int64_t row_begin,
                        int64_t row_end);

}  // namespace kvault::kernels

#endif  // KVAULT_MODEL_KERNELS_KQUANT_KERNELS_H_
