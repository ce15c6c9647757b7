// std::exp for floats, many values at a time, with the C library's bits.
// Attention's online softmax calls exp once per (query head, cell); the
// results feed the golden-exact V accumulation, so a faster exp must give
// exactly what std::exp (glibc's expf) gives. ExpInPlace evaluates glibc's
// expf algorithm (a 32-entry 2^(i/32) table and a cubic polynomial in
// double precision, since glibc 2.28) 8 values per AVX2 step, after a
// one-time check against std::exp on this machine; values outside the
// range it covers, and machines where the check fails, take std::exp.
#ifndef KVAULT_MODEL_EXACT_EXP_H_
#define KVAULT_MODEL_EXACT_EXP_H_

#include <cstddef>

namespace kvault {

// x[i] = std::exp(x[i]) for i < n, bit for bit.
void ExpInPlace(float* x, size_t n);

// Returns true when ExpInPlace runs its vector path here (AVX2 and FMA,
// and the start-up comparison with std::exp found no difference).
bool ExpInPlaceIsVectorized();

}  // namespace kvault

#endif  // KVAULT_MODEL_EXACT_EXP_H_
