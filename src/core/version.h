// kvault's version, reported by --version, /props and /metrics.
#ifndef KVAULT_CORE_VERSION_H_
#define KVAULT_CORE_VERSION_H_

namespace kvault {

inline constexpr char kKvaultVersion[] = "0.1.0";

}  // namespace kvault

#endif  // KVAULT_CORE_VERSION_H_
