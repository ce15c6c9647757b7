// tanh for floats with the same bits on every machine: the C library's
// tanhf differs between builds of the same glibc (aarch64's is compiled
// with fused multiply-adds, x86-64's without; glibc 2.41 replaced the
// algorithm), and gemma2's soft-capped attention and logits are chaotic
// enough that one ulp there moved a golden test's log-probabilities by
// 1.8e-3 under qemu-aarch64. PortableTanh evaluates the algorithm of
// glibc 2.36's tanhf and expm1f (fdlibm's: an expm1 rational
// approximation after reduction by multiples of ln 2), the library
// llama.cpp's recorded outputs (../shared/golden) ran on, in plain float
// operations with none fused (see CMakeLists.txt), so it gives that
// library's x86-64 bits everywhere.
#ifndef KVAULT_MODEL_PORTABLE_TANH_H_
#define KVAULT_MODEL_PORTABLE_TANH_H_

namespace kvault {

// Returns tanh(x) with x86-64 glibc 2.36's tanhf bits on any machine.
float PortableTanh(float x);

// Returns exp(x) - 1 with x86-64 glibc 2.36's expm1f bits on any machine
// (PortableTanh's building block).
float PortableExpm1(float x);

}  // namespace kvault

#endif  // KVAULT_MODEL_PORTABLE_TANH_H_
