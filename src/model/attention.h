// Grouped-query attention of a batch's queries over the K/V cells of their
// sequences, read in place from the paged KV storage. A query visits its
// sequence's cells in logical order, skipping cells whose position is past
// its own (the causal mask), so every sum runs in the same order whichever
// pages hold the cells and whatever else is in the batch.
#ifndef KVAULT_MODEL_ATTENTION_H_
#define KVAULT_MODEL_ATTENTION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/kv_types.h"
#include "model/compute_backend.h"

namespace kvault {

// A sequence's cells in logical order, with their positions.
struct SeqCells {
  std::vector<CellId> cells;
  std::vector<Pos> positions;  // [cells.size()]
};

struct AttentionShape {
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim_k = 0;
  uint32_t head_dim_v = 0;
  float scale = 1.0f;  // applied to q.k before the softmax
  // > 0: scores are softcap * tanhf(scale * q.k) (gemma2's attention
  // soft-capping, as ggml's flash attention applies it).
  float softcap = 0.0f;
  // > 0: a query at p sees only cells with p - pos < window (sliding-window
  // layers; llama.cpp's standard SWA mask).
  int32_t window = 0;
};

// For every batch token t and query head h: out[t, h] = softmax over the
// visible cells c of (scale * q[t, h] . K[c, h / n_gqa]) weighting V[c, ...].
// q: [num_tokens, n_head * head_dim_k]; out: [num_tokens, n_head *
// head_dim_v]; seq_of[t] indexes `seqs`; query_pos[t] is t's position. A
// token that sees no cell gets zeros. Runs on `backend`'s threads with its
// kernels.
void Attend(const KvStorage& storage, uint32_t layer,
            const AttentionShape& shape, std::span<const SeqCells> seqs,
            std::span<const uint32_t> seq_of, std::span<const Pos> query_pos,
            const float* q, float* out, const ComputeBackend& backend);

}  // namespace kvault

#endif  // KVAULT_MODEL_ATTENTION_H_
