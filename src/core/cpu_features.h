// What the CPU can run: the one place kvault asks the hardware (CPUID on
// x86-64, the auxiliary vector's hwcaps on aarch64), read once.
//
// Every SIMD choice in the tree (the kernel tables, the F16C row
// conversions, the vector exp, the llama.cpp build whose float orders are
// native) is made from CpuFeaturesInUse(), never from its own probe, so one
// setting moves all of them together: KVAULT_KERNELS=NAME caps the
// features at the named level, and a process run with KVAULT_KERNELS=avx2
// on an AVX-512 machine computes exactly what it computes on an AVX2-only
// CPU (CI runs the golden and kernel tests that way a second time).
#ifndef KVAULT_CORE_CPU_FEATURES_H_
#define KVAULT_CORE_CPU_FEATURES_H_

#include <optional>
#include <string>
#include <string_view>

namespace kvault {

// Instruction-set features, as groups the kernels are written for.
struct CpuFeatures {
  // x86-64.
  bool f16c = false;    // F16C, with the OS saving the YMM registers
  bool avx2 = false;    // AVX2 + FMA + F16C
  bool avx512 = false;  // AVX-512 F, BW, VL, DQ and VNNI (implies avx2)
  // aarch64.
  bool neon = false;     // Advanced SIMD (every aarch64 CPU)
  bool dotprod = false;  // SDOT/UDOT (implies neon)
  bool i8mm = false;     // SMMLA/USMMLA (implies neon)

  bool operator==(const CpuFeatures&) const = default;
};

// The levels KVAULT_KERNELS may name, lowest first within each family:
// "scalar"; "avx2", "avx512"; "neon", "neon-dotprod".
inline constexpr std::string_view kCpuLevelNames[] = {
    "scalar", "avx2", "avx512", "neon", "neon-dotprod"};

// Returns `detected` capped at level `name`: every feature above it
// cleared. Returns nullopt when `name` is no level or the CPU lacks it.
std::optional<CpuFeatures> CapCpuFeatures(const CpuFeatures& detected,
                                          std::string_view name);

// Returns this CPU's features, detected on the first call.
const CpuFeatures& DetectedCpuFeatures();

// Returns the features kvault uses: DetectedCpuFeatures() capped by the
// environment's KVAULT_KERNELS when it names a level this CPU has (an
// unknown or unsupported name is logged once and ignored). Fixed for the
// life of the process.
const CpuFeatures& CpuFeaturesInUse();

// Returns the KVAULT_KERNELS level in force ("" when none), for logs.
std::string_view CpuFeaturesCap();

// Returns the features as text, e.g. "avx2 avx512 f16c", "neon dotprod",
// or "none".
std::string CpuFeaturesString(const CpuFeatures& features);

}  // namespace kvault

#endif  // KVAULT_CORE_CPU_FEATURES_H_
