// Prefill attention in tiles: a block of one sequence's queries (all query
// heads of one KV head) attends over the sequence's cells one block of
// cells at a time. Each cell block's K/V slices are converted from fp16
// once per query block, not once per query, and stay in L1 while every
// query of the block uses them; the online softmax's exps run as one
// vector call per row and block (exact_exp.h). Per (query head, cell) the
// float operations and their order are attention.cc's (see
// attention_simd.h), so outputs are bit-identical to the per-query path:
// the running max, sum and fp16 accumulator of a row are carried from one
// cell block to the next in cell order.
#ifndef KVAULT_MODEL_ATTENTION_TILED_H_
#define KVAULT_MODEL_ATTENTION_TILED_H_

#include <cstdint>
#include <span>

#include "model/attention.h"
#include "model/attention_batched.h"

namespace kvault {

// Returns true when seq's cells' positions strictly increase, so every
// query sees a prefix of the cells (what the tiled path requires; a
// sequence's cells are appended in position order).
bool PositionsIncrease(const SeqCells& seq);

// The number of a sequence's batch tokens one tiled task takes for
// `shape`: about 128 query heads' rows.
uint32_t TiledTokensPerTask(const AttentionShape& shape);

// For each batch token t in `tokens` (all of sequence `seq`, at most
// TiledTokensPerTask(shape)) and each query head of KV head g: the
// attention output, as Attend (attention.h) defines it. q and out are the
// whole batch's ([num_tokens, n_head * head_dim]). Requires
// CanAttendGroupF16Fast(shape, isa) and PositionsIncrease(seq); `mode`
// says how (F16AttendMode).
void AttendTile(const F16GroupRows& rows, const AttentionShape& shape,
                const SeqCells& seq, std::span<const uint32_t> tokens,
                std::span<const Pos> query_pos, uint32_t g,
                const F16AttendMode& mode, const float* q, float* out);

}  // namespace kvault

#endif  // KVAULT_MODEL_ATTENTION_TILED_H_
