// The kernel sets: which tables this binary and CPU have, how a set's
// missing entries fall back to a lower set's, and which set's code each
// entry of a set runs (kernel_table.h, kernels.h).
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "model/kernels/kernel_table.h"
#include "model/kernels/kernels.h"

namespace kvault::kernels {
namespace {

// The weight kinds' names, by WeightKind.
constexpr const char* kWeightKindNames[kNumWeightKinds] = {
    "f32",  "f16",  "bf16",   "q8_0",          "q4_0",         "q4_1",
    "q5_0", "q5_1", "iq4_nl", "q2_k",          "q3_k",         "q4_k",
    "q5_k", "q6_k", "iq4_xs", "q4_k/groups16", "q4_0/groups16"};

// Calls fn(name, t.entry...) for every entry of the tables `t`, in one
// order, so code that walks a table names each entry once.
template <typename Fn, typename... Tables>
void VisitEntries(Fn&& fn, Tables&... t) {
  for (int k = 0; k < kNumWeightKinds; ++k) {
    fn(std::string_view(kWeightKindNames[k]), t.matmul[k]...);
  }
  fn(std::string_view("rms_norm"), t.rms_norm...);
  fn(std::string_view("softmax"), t.softmax...);
  fn(std::string_view("silu_mul"), t.silu_mul...);
  fn(std::string_view("dot_f32"), t.dot_f32...);
  fn(std::string_view("axpy"), t.axpy...);
  fn(std::string_view("dot_f16_f32"), t.dot_f16_f32...);
  fn(std::string_view("axpy_f16"), t.axpy_f16...);
  fn(std::string_view("quantize_q8_0"), t.quantize_q8_0...);
  fn(std::string_view("quantize_q8_1"), t.quantize_q8_1...);
  fn(std::string_view("quantize_q8_k"), t.quantize_q8_k...);
  fn(std::string_view("exp"), t.exp...);
  fn(std::string_view("ggml_gemv"), t.ggml_gemv...);
  fn(std::string_view("ggml_gemv2"), t.ggml_gemv2...);
  fn(std::string_view("ggml_gemm_rows"), t.ggml_gemm_rows...);
  fn(std::string_view("ggml_swiglu"), t.ggml_swiglu...);
}

// Fills the null entries of `t` from `base` (see KernelTable).
KernelTable Merged(KernelTable t, const KernelTable& base) {
  VisitEntries(
      [](std::string_view, auto& mine, const auto& lower) {
        if (mine == nullptr) mine = lower;
      },
      t, base);
  return t;
}

// Every entry of `t` as (name, address; null where t has none).
std::vector<std::pair<std::string_view, const void*>> EntryAddresses(
    const KernelTable& t) {
  std::vector<std::pair<std::string_view, const void*>> out;
  VisitEntries(
      [&out](std::string_view name, const auto& entry) {
        out.emplace_back(name, reinterpret_cast<const void*>(entry));
      },
      t);
  return out;
}

// AVX2 over scalar.
const KernelTable* MergedAvx2Table() {
  static const KernelTable kMerged =
      Merged(*Avx2KernelTable(), *ScalarKernelTable());
  return &kMerged;
}

// AVX-512 over AVX2 (over scalar): the AVX-512 file has MatMul kernels only.
const KernelTable* MergedAvx512Table() {
  static const KernelTable kMerged =
      Merged(*Avx512KernelTable(), *MergedAvx2Table());
  return &kMerged;
}

// NEON over scalar.
const KernelTable* MergedNeonTable() {
  static const KernelTable kMerged =
      Merged(*NeonKernelTable(), *ScalarKernelTable());
  return &kMerged;
}

// NEON with dot products over NEON (over scalar).
const KernelTable* MergedNeonDotTable() {
  static const KernelTable kMerged =
      Merged(*NeonDotKernelTable(), *MergedNeonTable());
  return &kMerged;
}

// Lowest first within each family (SupportedIsas keeps this order).
constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon,
                            Isa::kNeonDot};

}  // namespace

const KernelTable* KernelTableFor(Isa isa) {
  const CpuFeatures& cpu = CpuFeaturesInUse();
  switch (isa) {
    case Isa::kScalar:
      return ScalarKernelTable();
    case Isa::kAvx2:
      return cpu.avx2 && Avx2KernelTable() != nullptr ? MergedAvx2Table()
                                                      : nullptr;
    case Isa::kAvx512:
      return cpu.avx512 && Avx512KernelTable() != nullptr &&
                     Avx2KernelTable() != nullptr
                 ? MergedAvx512Table()
                 : nullptr;
    case Isa::kNeon:
      return cpu.neon && NeonKernelTable() != nullptr ? MergedNeonTable()
                                                      : nullptr;
    case Isa::kNeonDot:
      return cpu.dotprod && NeonDotKernelTable() != nullptr &&
                     NeonKernelTable() != nullptr
                 ? MergedNeonDotTable()
                 : nullptr;
  }
  return nullptr;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDot:
      return "neon-dotprod";
  }
  return "?";
}

std::optional<Isa> IsaFromName(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (IsaName(isa) == name) return isa;
  }
  return std::nullopt;
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (KernelTableFor(isa) != nullptr) isas.push_back(isa);
  }
  return isas;
}

Isa BestIsa() { return SupportedIsas().back(); }

std::vector<KernelEntry> KernelEntries(Isa isa) {
  const KernelTable* merged = KernelTableFor(isa);
  KV_CHECK(merged != nullptr)
      << "kernel set " << IsaName(isa) << " not supported here";
  // The ISA's own table, then the ones it falls back to, in order.
  std::vector<std::pair<Isa, const KernelTable*>> chain;
  switch (isa) {
    case Isa::kAvx512:
      chain = {{Isa::kAvx512, Avx512KernelTable()},
               {Isa::kAvx2, Avx2KernelTable()}};
      break;
    case Isa::kAvx2:
      chain = {{Isa::kAvx2, Avx2KernelTable()}};
      break;
    case Isa::kNeonDot:
      chain = {{Isa::kNeonDot, NeonDotKernelTable()},
               {Isa::kNeon, NeonKernelTable()}};
      break;
    case Isa::kNeon:
      chain = {{Isa::kNeon, NeonKernelTable()}};
      break;
    case Isa::kScalar:
      break;
  }
  chain.emplace_back(Isa::kScalar, ScalarKernelTable());
  // Every table lists its entries in VisitEntries' order, so entry i of
  // the merged table is entry i of each table in the chain.
  const auto merged_entries = EntryAddresses(*merged);
  std::vector<KernelEntry> entries;
  for (size_t i = 0; i < merged_entries.size(); ++i) {
    KernelEntry e{std::string(merged_entries[i].first), Isa::kScalar};
    for (const auto& [source, table] : chain) {
      if (EntryAddresses(*table)[i].second == merged_entries[i].second) {
        e.source = source;
        break;
      }
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace kvault::kernels
