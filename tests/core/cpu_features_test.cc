// The one CPU-detection site and its KVAULT_KERNELS cap.
#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace kvault {
namespace {

CpuFeatures X86Avx512() {
  CpuFeatures f;
  f.f16c = f.avx2 = f.avx512 = true;
  return f;
}

CpuFeatures Arm64Dotprod() {
  CpuFeatures f;
  f.neon = f.dotprod = f.i8mm = true;
  return f;
}

TEST(CpuFeaturesTest, CapClearsEveryFeatureAboveTheLevel) {
  const CpuFeatures x86 = X86Avx512();
  EXPECT_EQ(CapCpuFeatures(x86, "avx512"), x86);
  CpuFeatures avx2 = x86;
  avx2.avx512 = false;
  EXPECT_EQ(CapCpuFeatures(x86, "avx2"), avx2);
  EXPECT_EQ(CapCpuFeatures(x86, "scalar"), CpuFeatures{});

  const CpuFeatures arm = Arm64Dotprod();
  EXPECT_EQ(CapCpuFeatures(arm, "neon-dotprod"), arm);
  CpuFeatures neon;
  neon.neon = true;
  EXPECT_EQ(CapCpuFeatures(arm, "neon"), neon);
  EXPECT_EQ(CapCpuFeatures(arm, "scalar"), CpuFeatures{});
}

TEST(CpuFeaturesTest, CapRefusesLevelsTheCpuLacksAndUnknownNames) {
  CpuFeatures avx2_only = X86Avx512();
  avx2_only.avx512 = false;
  EXPECT_EQ(CapCpuFeatures(avx2_only, "avx512"), std::nullopt);
  EXPECT_EQ(CapCpuFeatures(avx2_only, "neon"), std::nullopt);
  EXPECT_EQ(CapCpuFeatures(Arm64Dotprod(), "avx2"), std::nullopt);
  EXPECT_EQ(CapCpuFeatures(avx2_only, "AVX2"), std::nullopt);
  EXPECT_EQ(CapCpuFeatures(avx2_only, ""), std::nullopt);
}

TEST(CpuFeaturesTest, EveryLevelNameIsACapOnSomeCpu) {
  for (std::string_view name : kCpuLevelNames) {
    EXPECT_TRUE(CapCpuFeatures(X86Avx512(), name).has_value() ||
                CapCpuFeatures(Arm64Dotprod(), name).has_value())
        << name;
  }
}

// The features in use are the detected ones, capped by this process's
// KVAULT_KERNELS when it names a level the CPU has (CI runs the suite once
// without it and once with KVAULT_KERNELS=avx2).
TEST(CpuFeaturesTest, InUseIsTheDetectedFeaturesUnderTheEnvironmentsCap) {
  const CpuFeatures& detected = DetectedCpuFeatures();
  const CpuFeatures& in_use = CpuFeaturesInUse();
  const char* env = std::getenv("KVAULT_KERNELS");
  const std::optional<CpuFeatures> capped =
      env == nullptr ? std::nullopt : CapCpuFeatures(detected, env);
  if (capped) {
    EXPECT_EQ(in_use, *capped);
    EXPECT_EQ(CpuFeaturesCap(), env);
  } else {
    EXPECT_EQ(in_use, detected);
    EXPECT_EQ(CpuFeaturesCap(), "");
  }
  // Groups imply the ones below them.
  EXPECT_TRUE(!in_use.avx512 || in_use.avx2);
  EXPECT_TRUE(!in_use.avx2 || in_use.f16c);
  EXPECT_TRUE(!in_use.dotprod || in_use.neon);
#if defined(__aarch64__)
  EXPECT_TRUE(detected.neon);
#endif
  std::cout << "detected: " << CpuFeaturesString(detected)
            << "; in use: " << CpuFeaturesString(in_use) << "\n";
}

TEST(CpuFeaturesTest, FeatureStringNamesEachGroup) {
  EXPECT_EQ(CpuFeaturesString(CpuFeatures{}), "none");
  EXPECT_EQ(CpuFeaturesString(X86Avx512()), "avx2 avx512 f16c");
  EXPECT_EQ(CpuFeaturesString(Arm64Dotprod()), "neon dotprod i8mm");
}

}  // namespace
}  // namespace kvault
