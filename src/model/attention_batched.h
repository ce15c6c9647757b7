// A faster AttendGroup for F16 KV caches on CPUs with AVX2, FMA and F16C:
// each cell's K and V slices are read once for every query head of the
// group, and the V update is fused with the fp16 rounding of the
// accumulator. It performs, per (query, head, cell), the
// same float operations in the same order as attention.cc's generic path
// (ggml_compat::DotF16's order for q . k, FMA-based AxpyF16,
// round-to-nearest-even fp16 rounding), so switching paths changes no bit
// of the output.
#ifndef KVAULT_MODEL_ATTENTION_BATCHED_H_
#define KVAULT_MODEL_ATTENTION_BATCHED_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "model/attention.h"
#include "model/ggml_compat.h"
#include "model/kernels/kernels.h"

namespace kvault {

// Where a layer's K/V rows live and which slice group `g` reads.
struct F16GroupRows {
  const std::byte* k_base = nullptr;  // row c at k_base + c * k_row_bytes
  const std::byte* v_base = nullptr;
  uint64_t k_row_bytes = 0;
  uint64_t v_row_bytes = 0;
};

// How the fast paths compute; every mode gives attention.cc's bits under
// the backend options F16AttendModeFor was given.
struct F16AttendMode {
  // V rows accumulated two heads at a time (kAvx512; same bits, faster).
  bool two_at_once = false;
  // q . k in an AVX-512 llama.cpp build's ggml_vec_dot_f16 order, else an
  // AVX2 build's (ggml_compat::DotF16).
  bool dot512 = false;
};

// Returns the mode of kernel set `isa` reproducing llama.cpp build `build`.
F16AttendMode F16AttendModeFor(kernels::Isa isa, ggml_compat::GgmlBuild build);

// Returns true when AttendGroupF16Fast can run for `shape` with the kernel
// set `isa`: AVX2 or AVX-512 (whose vector kernels are AVX2's), and head
// sizes that are multiples of 8 no larger than 256.
bool CanAttendGroupF16Fast(const AttentionShape& shape, kernels::Isa isa);

// The generic AttendGroup for an F16 cache: out[j] for the n_gqa query
// heads q[j] ([n_gqa, head_dim_k]) sharing KV head g, over seq's cells
// with positions <= query_pos, as `mode` says. Requires
// CanAttendGroupF16Fast(shape, isa) for the isa `mode` was made for.
void AttendGroupF16Fast(const F16GroupRows& rows, const AttentionShape& shape,
                        const SeqCells& seq, Pos query_pos, uint32_t g,
                        const F16AttendMode& mode, const float* q, float* out);

// Attend (attention.h) with the F16 fast paths: a sequence with several
// queries in the batch (a prefill) attends in tiles (attention_tiled.h),
// other queries one at a time, reading K/V in place. `run(n, fn)` calls
// fn(i) for i < n, on any threads. Requires CanAttendGroupF16Fast(shape,
// isa).
void AttendF16Fast(
    const F16GroupRows& rows, const AttentionShape& shape,
    const F16AttendMode& mode, std::span<const SeqCells> seqs,
    std::span<const uint32_t> seq_of, std::span<const Pos> query_pos,
    const float* q, float* out,
    const std::function<void(size_t, const std::function<void(size_t)>&)>& run);

}  // namespace kvault

#endif  // KVAULT_MODEL_ATTENTION_BATCHED_H_
