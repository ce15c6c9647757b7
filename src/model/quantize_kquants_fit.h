// The scale searches of the k-quants (ggml's make_qx_quants,
// make_q3_quants and make_qkx2_quants, rewritten with the same float
// operations in the same order); used by quantize_kquants*.cc only.
#ifndef KVAULT_MODEL_QUANTIZE_KQUANTS_FIT_H_
#define KVAULT_MODEL_QUANTIZE_KQUANTS_FIT_H_

#include <cstdint>

namespace kvault::quant_internal {

// Symmetric codes in [0, 2 * nmax) for n values, weights x^2 (or `qw` when
// not null): tries 19 scales around nmax / max|x| and keeps the one of
// least weighted squared error. Returns the scale (0 for an all-zero
// group); L[i] = code + nmax.
float FitSymmetric(int n, int nmax, const float* x, int8_t* L, const float* qw);
// Q3_K's variant: starts at nmax / max|x| and moves single codes while the
// weighted error drops (at most 5 rounds).
float FitSymmetricGreedy(int n, int nmax, const float* x, int8_t* L);
// Asymmetric codes in [0, nmax] with a min: x ~ scale * L - the_min. Tries
// nstep + 1 scales (nmax + rmin + rdelta * is) / (max - min) and keeps the
// least weighted error (absolute when use_mad). Returns the scale.
float FitWithMin(int n, int nmax, const float* x, const float* weights,
                 uint8_t* L, float* the_min, float rmin, float rdelta,
                 int nstep, bool use_mad);

}  // namespace kvault::quant_internal

#endif  // KVAULT_MODEL_QUANTIZE_KQUANTS_FIT_H_
