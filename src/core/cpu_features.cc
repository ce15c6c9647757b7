#include "core/cpu_features.h"

#include <cstdlib>

#include "core/log.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define KVAULT_CPU_X86 1
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#define KVAULT_CPU_ARM64 1
#endif

namespace kvault {
namespace {

#ifdef KVAULT_CPU_X86
CpuFeatures Detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  // clang < 16 has no "f16c" feature name, so CPUID.1:ECX bit 29 is read
  // directly; "avx" also covers the OS saving the YMM registers.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c_bit =
      __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
  f.f16c = __builtin_cpu_supports("avx") && f16c_bit;
  f.avx2 = f.f16c && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
  return f;
}
#elif defined(KVAULT_CPU_ARM64)
CpuFeatures Detect() {
  CpuFeatures f;
  const unsigned long hwcap = getauxval(AT_HWCAP);
  f.neon = (hwcap & HWCAP_ASIMD) != 0;
  f.dotprod = f.neon && (hwcap & HWCAP_ASIMDDP) != 0;
#ifdef HWCAP2_I8MM
  f.i8mm = f.neon && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
  return f;
}
#else
CpuFeatures Detect() { return CpuFeatures{}; }
#endif

struct InUse {
  CpuFeatures features;
  std::string cap;  // the KVAULT_KERNELS level applied, or ""
};

InUse ReadInUse() {
  InUse in_use{DetectedCpuFeatures(), ""};
  const char* env = std::getenv("KVAULT_KERNELS");
  if (env == nullptr || *env == '\0') return in_use;
  if (std::optional<CpuFeatures> capped = CapCpuFeatures(in_use.features, env)) {
    in_use.features = *capped;
    in_use.cap = env;
    return in_use;
  }
  KV_LOG(WARNING) << "KVAULT_KERNELS=" << env
                  << " is not a kernel level this CPU has (it has: "
                  << CpuFeaturesString(in_use.features)
                  << "); using every feature it has";
  return in_use;
}

const InUse& InUseOnce() {
  static const InUse kInUse = ReadInUse();
  return kInUse;
}

}  // namespace

std::optional<CpuFeatures> CapCpuFeatures(const CpuFeatures& detected,
                                          std::string_view name) {
  CpuFeatures f = detected;
  if (name == "scalar") return CpuFeatures{};
  if (name == "avx2" && f.avx2) {
    f.avx512 = false;
    return f;
  }
  if (name == "avx512" && f.avx512) return f;
  if (name == "neon" && f.neon) {
    f.dotprod = f.i8mm = false;
    return f;
  }
  if (name == "neon-dotprod" && f.dotprod) return f;
  return std::nullopt;
}

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures kDetected = Detect();
  return kDetected;
}

const CpuFeatures& CpuFeaturesInUse() { return InUseOnce().features; }

std::string_view CpuFeaturesCap() { return InUseOnce().cap; }

std::string CpuFeaturesString(const CpuFeatures& f) {
  std::string s;
  const auto add = [&s](bool on, std::string_view name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.avx512, "avx512");
  add(f.f16c, "f16c");
  add(f.neon, "neon");
  add(f.dotprod, "dotprod");
  add(f.i8mm, "i8mm");
  return s.empty() ? "none" : s;
}

}  // namespace kvault
