// InferenceContext: the forward pass of a LlamaModel over a paged KvCache.
// One Decode call takes a batch mixing sequences (a prefill of many tokens
// for one, one decode token for each of others), writes every token's K/V
// into the cells the cache assigns, and returns the logits asked for.
//
// Paging, batching and save/restore are invisible: attention visits a
// sequence's cells in logical (position) order whatever pages hold them,
// and every reduction's order depends only on that order, so the logits of
// a token are bit-identical however the cache is laid out and whatever else
// is in the batch (given the kernels' determinism contract).
#ifndef KVAULT_MODEL_INFERENCE_H_
#define KVAULT_MODEL_INFERENCE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "core/status_or.h"
#include "kv/kv_cache.h"
#include "kv/kv_types.h"
#include "model/compute_backend.h"
#include "model/llama_model.h"

namespace kvault {

struct BatchToken {
  SeqId seq;
  TokenId token = 0;
  Pos pos = 0;
  bool want_logits = false;
};

// Not thread-safe: one Decode at a time per context (and per cache); the
// context's ComputeBackend parallelises inside a call.
class InferenceContext {
 public:
  // Uses `model` and `cache` (not owned; both outlive the context; the
  // cache's layout must be model->KvLayoutFor(its dtype)). Computes with a
  // ComputeBackend of `compute` (its worker threads live as long as the
  // context); the model's matrices should be laid out for compute.isa
  // (LlamaModel::Load), or they take slower kernels.
  explicit InferenceContext(const LlamaModel* model, KvCache* cache,
                            const ComputeBackendOptions& compute = {});

  // Appends every token's K/V to its sequence (the tokens of one sequence
  // in batch order, positions as given) and returns the logits
  // [num_wanted, n_vocab], in batch order, of the tokens with want_logits.
  // A token at pos p attends to its sequence's cells with pos <= p (earlier
  // tokens of the same batch included). Each sequence's positions must be
  // strictly increasing and above its cached cells' positions.
  // InvalidArgument (nothing appended) for an empty batch, a token id out
  // of range, bad positions (negative, INT32_MAX, not increasing), the
  // scratch sequences (IsScratchSeq), or a cache whose layout
  // does not fit the model; ResourceExhausted (nothing appended) when the
  // cache lacks room.
  StatusOr<std::vector<float>> Decode(std::span<const BatchToken> batch);

  // Removes `seq`'s cells with pos in [p0, p1) and moves the later ones
  // down by p1 - p0, rotating their keys to the new positions as if they
  // had been computed there (llama.cpp's context shift: seq_rm + seq_add).
  // InvalidArgument unless 0 <= p0 < p1; ResourceExhausted when a shared
  // page cannot be copied (then nothing changed).
  Status DiscardRange(SeqId seq, Pos p0, Pos p1);

  // Returns the model.
  const LlamaModel& model() const { return *model_; }
  // Returns the cache.
  KvCache* cache() const { return cache_; }
  // Returns the backend the forward pass computes with.
  const ComputeBackend& backend() const { return backend_; }

 private:
  Status ValidateBatch(std::span<const BatchToken> batch) const;
  // Reserves cells for the batch, all sequences or none; returns the cell
  // of each batch token.
  StatusOr<std::vector<CellId>> AppendBatch(std::span<const BatchToken> batch);

  const LlamaModel* model_;
  KvCache* cache_;
  ComputeBackend backend_;
};

}  // namespace kvault

#endif  // KVAULT_MODEL_INFERENCE_H_
