// The aarch64 kernel tables: NEON, and NEON with SDOT/UDOT. Their entries
// are filled as NEON kernels are written; a null entry falls back to the
// next lower table (kernel_table.h), so every weight kind runs on aarch64
// from the first day, through the scalar references where no NEON kernel
// exists yet.
#include "model/kernels/kernel_table.h"

namespace kvault::kernels {

#if defined(__aarch64__) && defined(__ARM_NEON)
namespace {
constexpr KernelTable kNeonTable = {"neon"};
constexpr KernelTable kNeonDotTable = {"neon-dotprod"};
}  // namespace

const KernelTable* NeonKernelTable() { return &kNeonTable; }
const KernelTable* NeonDotKernelTable() { return &kNeonDotTable; }
#else
const KernelTable* NeonKernelTable() { return nullptr; }
const KernelTable* NeonDotKernelTable() { return nullptr; }
#endif

}  // namespace kvault::kernels
