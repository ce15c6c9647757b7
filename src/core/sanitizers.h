// KVAULT_ADDRESS_SANITIZER: 1 in a build with AddressSanitizer, else 0.
// GCC says so with __SANITIZE_ADDRESS__, clang (before 15) only through
// __has_feature(address_sanitizer); tests that scale their work down under
// ASan (or skip measurements its quarantine distorts) test this instead.
#ifndef KVAULT_CORE_SANITIZERS_H_
#define KVAULT_CORE_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define KVAULT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVAULT_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef KVAULT_ADDRESS_SANITIZER
#define KVAULT_ADDRESS_SANITIZER 0
#endif

#endif  // KVAULT_CORE_SANITIZERS_H_
