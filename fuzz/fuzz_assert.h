// FUZZ_ASSERT: the fuzz targets' property check. A broken property traps,
// so libFuzzer records the input that broke it.
#ifndef KVAULT_FUZZ_FUZZ_ASSERT_H_
#define KVAULT_FUZZ_FUZZ_ASSERT_H_

#include <cstdio>

#define FUZZ_ASSERT(cond)                                              \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "FUZZ_ASSERT failed: %s at %s:%d\n", #cond, \
                   __FILE__, __LINE__);                                \
      __builtin_trap();                                                \
    }                                                                  \
  } while (0)

#endif  // KVAULT_FUZZ_FUZZ_ASSERT_H_
