#include "model/inference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "kv/state_file.h"
#include "model/attention.h"
#include "model/gelu.h"
#include "model/ggml_compat.h"
#include "model/moe_ffn.h"
#include "model/portable_tanh.h"
#include "model/quantize.h"
#include "model/rope.h"

namespace kvault {
namespace {

// The batch regrouped by sequence, in order of first appearance.
struct SeqGroups {
  std::vector<SeqId> seqs;
  std::vector<uint32_t> seq_of;                // [num_tokens] -> seqs
  std::vector<std::vector<uint32_t>> members;  // per seq: batch indices
};

SeqGroups GroupBySeq(std::span<const BatchToken> batch) {
  SeqGroups groups;
  std::unordered_map<uint32_t, uint32_t> index_of;
  groups.seq_of.reserve(batch.size());
  for (size_t t = 0; t < batch.size(); ++t) {
    auto [it, inserted] =
        index_of.emplace(batch[t].seq.value(), groups.seqs.size());
    if (inserted) {
      groups.seqs.push_back(batch[t].seq);
      groups.members.emplace_back();
    }
    groups.seq_of.push_back(it->second);
    groups.members[it->second].push_back(static_cast<uint32_t>(t));
  }
  return groups;
}

// Returns the highest position among `seq`'s cached cells, or min() when
// it has none.
Pos MaxCachedPos(const KvCache& cache, SeqId seq) {
  Pos max_pos = std::numeric_limits<Pos>::min();
  for (const TokenPos& cell : cache.table().Cells(seq)) {
    max_pos = std::max(max_pos, cell.pos);
  }
  return max_pos;
}

// count[s]: the number of batch tokens of sequence s.
std::vector<uint32_t> TokensPerSeq(std::span<const uint32_t> seq_of) {
  std::vector<uint32_t> count;
  for (uint32_t s : seq_of) {
    if (s >= count.size()) count.resize(s + 1, 0);
    ++count[s];
  }
  return count;
}

// The summation order of each batch token's mat-vec products: llama.cpp's
// for a prompt batch (kGemm) when the token's sequence has several tokens
// in this batch, its single-token order (kGemv) otherwise. Deciding per
// sequence keeps a token's logits independent of the other sequences in
// the batch.
std::vector<ggml_compat::DotOrder> DotOrders(std::span<const uint32_t> seq_of) {
  const std::vector<uint32_t> count = TokensPerSeq(seq_of);
  std::vector<ggml_compat::DotOrder> orders;
  for (uint32_t s : seq_of) {
    orders.push_back(count[s] >= 2 ? ggml_compat::DotOrder::kGemm
                                   : ggml_compat::DotOrder::kGemv);
  }
  return orders;
}

// The order of each batch token's products with repacked quantized weights
// (Q4_K, Q2_K): llama.cpp multiplies a batch of n tokens in its GEMM four
// at a time, the last n % 4 in its GEMV. Counted per sequence, as
// DotOrders decides.
std::vector<kernels::DotOrder> RepackedOrders(
    std::span<const uint32_t> seq_of) {
  const std::vector<uint32_t> count = TokensPerSeq(seq_of);
  std::vector<uint32_t> seen(count.size(), 0);
  std::vector<kernels::DotOrder> orders;
  for (uint32_t s : seq_of) {
    const bool gemm = seen[s]++ < count[s] - count[s] % 4;
    orders.push_back(gemm ? kernels::DotOrder::kGemm
                          : kernels::DotOrder::kGemv);
  }
  return orders;
}

// Whether `layer` attends through a sliding window (ArchSpec::swa_pattern,
// as llama.cpp's set_swa_pattern: all but every pattern-th layer).
bool IsSwaLayer(const LlamaHparams& h, const ArchSpec& arch, uint32_t layer) {
  const uint32_t pattern = h.swa_pattern;
  return arch.swa_pattern > 0 && pattern > 0 && h.n_swa > 0 &&
         layer % pattern < pattern - 1;
}

// The RoPE frequency base and scale of `layer`.
std::pair<float, float> LayerRope(const LlamaHparams& h, const ArchSpec& arch,
                                  uint32_t layer) {
  if (arch.swa_rope_freq_base > 0.0f && IsSwaLayer(h, arch, layer)) {
    return {arch.swa_rope_freq_base, 1.0f};
  }
  return {h.rope_freq_base, h.rope_freq_scale()};
}

void AddInPlace(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

InferenceContext::InferenceContext(const LlamaModel* model, KvCache* cache,
                                   const ComputeBackendOptions& compute)
    : model_(model), cache_(cache), backend_(compute) {}

Status InferenceContext::ValidateBatch(
    std::span<const BatchToken> batch) const {
  if (batch.empty()) return InvalidArgumentError("Decode: empty batch");
  const KvStorage* storage = cache_->storage();
  if (storage == nullptr) {
    return InvalidArgumentError("Decode: the KV cache holds no K/V data");
  }
  const KvLayout want = model_->KvLayoutFor(storage->layout().dtype);
  if (!(storage->layout() == want)) {
    return InvalidArgumentError(
        "Decode: cache layout " + storage->layout().ToString() +
        " does not fit the model, expected " + want.ToString());
  }
  std::unordered_map<uint32_t, Pos> last_pos;
  for (size_t t = 0; t < batch.size(); ++t) {
    const BatchToken& b = batch[t];
    const std::string where = "Decode: batch token " + std::to_string(t) +
                              " (seq#" + std::to_string(b.seq.value()) + ")";
    if (b.token < 0 || static_cast<uint32_t>(b.token) >= model_->n_vocab()) {
      return InvalidArgumentError(where + ": token id " +
                                  std::to_string(b.token) + " not in [0, " +
                                  std::to_string(model_->n_vocab()) + ")");
    }
    if (IsScratchSeq(b.seq)) {
      return InvalidArgumentError(
          where + ": a restore scratch sequence (seq# >= " +
          std::to_string(kFirstScratchSeq.value()) + ")");
    }
    auto [it, inserted] = last_pos.emplace(b.seq.value(), 0);
    if (inserted) it->second = MaxCachedPos(*cache_, b.seq);
    // The top position is reserved: a failed batch is undone by removing
    // positions [first new, max()).
    if (b.pos < 0 || b.pos <= it->second ||
        b.pos == std::numeric_limits<Pos>::max()) {
      return InvalidArgumentError(
          where + ": position " + std::to_string(b.pos) +
          " must be in [0, 2^31 - 1) and above " + std::to_string(it->second));
    }
    it->second = b.pos;
  }
  return Status::Ok();
}

StatusOr<std::vector<CellId>> InferenceContext::AppendBatch(
    std::span<const BatchToken> batch) {
  const SeqGroups groups = GroupBySeq(batch);
  std::vector<CellId> cell_of(batch.size());
  std::vector<bool> existed(groups.seqs.size());
  for (size_t s = 0; s < groups.seqs.size(); ++s) {
    existed[s] = cache_->table().Contains(groups.seqs[s]);
  }
  for (size_t s = 0; s < groups.seqs.size(); ++s) {
    const SeqId seq = groups.seqs[s];
    std::vector<TokenPos> tokens;
    for (uint32_t t : groups.members[s]) {
      tokens.push_back({batch[t].token, batch[t].pos});
    }
    StatusOr<std::vector<CellId>> cells = cache_->Append(seq, tokens);
    if (!cells.ok()) {
      // Undo the sequences appended so far: all or nothing.
      for (size_t u = 0; u < s; ++u) {
        const SeqId done = groups.seqs[u];
        if (!existed[u]) {
          cache_->RemoveSequence(done);
          continue;
        }
        // Only the new cells lie at or past the first new position
        // (ValidateBatch); truncating an unshared tail cannot fail.
        const Pos first = batch[groups.members[u].front()].pos;
        (void)cache_->RemoveRange(done, first, std::numeric_limits<Pos>::max());
      }
      return cells.status().WithContext("Decode");
    }
  }
  // Read the cells back only now: with contiguous+defrag a later Append may
  // have moved the cells an earlier one returned. Each sequence's new
  // tokens are its last cells.
  for (size_t s = 0; s < groups.seqs.size(); ++s) {
    const std::vector<uint32_t>& members = groups.members[s];
    const uint64_t first =
        cache_->table().Length(groups.seqs[s]) - members.size();
    for (size_t i = 0; i < members.size(); ++i) {
      cell_of[members[i]] = cache_->table().CellAt(groups.seqs[s], first + i);
    }
  }
  return cell_of;
}

namespace {

// The activations of one forward pass and the steps over them. Buffers are
// [num_tokens, width] row-major.
class ForwardPass {
 public:
  ForwardPass(const LlamaModel& model, KvStorage* storage,
              const ComputeBackend& backend, std::span<const BatchToken> batch,
              std::span<const CellId> cells, std::vector<SeqCells> seqs,
              std::vector<uint32_t> seq_of)
      : h_(model.hparams()),
        w_(model.weights()),
        arch_(model.arch()),
        storage_(storage),
        backend_(backend),
        batch_(batch),
        cells_(cells),
        seqs_(std::move(seqs)),
        seq_of_(std::move(seq_of)),
        positions_(Positions(batch)),
        rope_(positions_, h_.n_rot, h_.rope_freq_base, h_.rope_freq_scale(),
              w_.rope_freqs),

        orders_(DotOrders(seq_of_)),
        repacked_orders_(RepackedOrders(seq_of_)),
        n_(batch.size()) {
    if (arch_.swa_rope_freq_base > 0.0f) {
      rope_swa_.emplace(positions_, h_.n_rot, arch_.swa_rope_freq_base, 1.0f,
                        w_.rope_freqs);
    }
  }

  // Runs every layer and returns the wanted logits.
  std::vector<float> Run() {
    Embed();
    for (uint32_t layer = 0; layer < h_.n_layer; ++layer) {
      AttentionBlock(layer);
      FeedForwardBlock(layer);
    }
    return Logits();
  }

 private:
  static std::vector<Pos> Positions(std::span<const BatchToken> batch) {
    std::vector<Pos> out;
    for (const BatchToken& b : batch) out.push_back(b.pos);
    return out;
  }

  // F32 and F16 weights use llama.cpp's summation orders (ggml_compat.h);
  // quantized ones the kernels', in the orders of its repacked kernels.
  void MatMul(const kernels::MatrixView& m, const std::vector<float>& x,
              std::vector<float>* y) {
    y->resize(n_ * m.rows);
    backend_.MatMul(m, x.data(),
                    ggml_compat::Supports(m.type) ? orders_ : repacked_orders_,
                    y->data());
  }

  // out[t] = RmsNorm(x[t]) * weight for every token.
  void Norm(const std::vector<float>& x, const std::vector<float>& weight,
            std::vector<float>* out) {
    const size_t d = weight.size();
    out->resize(n_ * d);
    for (size_t t = 0; t < n_; ++t) {
      ggml_compat::RmsNorm(&x[t * d], weight.data(), d, h_.rms_norm_eps,
                           &(*out)[t * d]);
    }
  }

  void Embed() {
    const kernels::MatrixView& e = w_.token_embd;
    x_.resize(n_ * h_.n_embd);
    for (size_t t = 0; t < n_; ++t) {
      std::span row(e.data + e.row_bytes * batch_[t].token, e.row_bytes);
      // Cannot fail: the type and row size were checked at load.
      (void)DequantizeRow(e.type, row,
                          std::span(&x_[t * h_.n_embd], h_.n_embd));
    }
    if (arch_.embed_scale) {
      const float scale = std::sqrt(static_cast<float>(h_.n_embd));
      for (float& v : x_) v *= scale;
    }
  }

  // Adds bias, applies per-head norm and RoPE to the rows of `x`
  // [n_, num_heads * head_dim].
  void PrepareHeads(std::vector<float>* x, const std::vector<float>& bias,
                    const std::vector<float>& head_norm, uint32_t num_heads,
                    uint32_t head_dim, const RopeTable* rope) {
    const size_t width = size_t{num_heads} * head_dim;
    for (size_t t = 0; t < n_; ++t) {
      float* row = &(*x)[t * width];
      for (size_t i = 0; i < bias.size(); ++i) row[i] += bias[i];
      for (uint32_t hd = 0; !head_norm.empty() && hd < num_heads; ++hd) {
        float* head = row + size_t{hd} * head_dim;
        ggml_compat::RmsNorm(head, head_norm.data(), head_dim, h_.rms_norm_eps,
                             head);
      }
      if (rope) rope->Apply(arch_.rope_style, t, row, num_heads, head_dim);
    }
  }

  void AttentionBlock(uint32_t layer) {
    const LayerWeights& lw = w_.layers[layer];
    Norm(x_, lw.attn_norm, &xn_);
    MatMul(lw.wq, xn_, &q_);
    MatMul(lw.wk, xn_, &k_);
    MatMul(lw.wv, xn_, &v_);
    const RopeTable* rope =
        rope_swa_ && IsSwaLayer(h_, arch_, layer) ? &*rope_swa_ : &rope_;
    PrepareHeads(&q_, lw.bq, lw.q_norm, h_.n_head, h_.n_embd_head_k, rope);
    PrepareHeads(&k_, lw.bk, lw.k_norm, h_.n_head_kv, h_.n_embd_head_k, rope);
    PrepareHeads(&v_, lw.bv, {}, h_.n_head_kv, h_.n_embd_head_v, nullptr);
    const size_t k_width = h_.n_embd_k_gqa();
    const size_t v_width = h_.n_embd_v_gqa();
    // Written before attention: a token attends to itself and to the
    // earlier tokens of its sequence in this batch.
    for (size_t t = 0; t < n_; ++t) {
      storage_->Write(KvSide::kK, layer, cells_[t],
                      std::span(&k_[t * k_width], k_width));
      storage_->Write(KvSide::kV, layer, cells_[t],
                      std::span(&v_[t * v_width], v_width));
    }
    AttentionShape shape{
        h_.n_head, h_.n_head_kv, h_.n_embd_head_k, h_.n_embd_head_v,
        1.0f / std::sqrt(static_cast<float>(h_.n_embd_head_k))};
    if (arch_.scale_q) {
      // ggml_scale of Q, then attention with scale 1 (ArchSpec::scale_q).
      for (float& x : q_) x *= shape.scale;
      shape.scale = 1.0f;
    }
    ArchAttention(layer, &shape);
    att_.resize(n_ * h_.n_head * h_.n_embd_head_v);
    Attend(*storage_, layer, shape, seqs_, seq_of_, positions_, q_.data(),
           att_.data(), backend_);
    MatMul(lw.wo, att_, &xn_);
    if (arch_.post_norms) Norm(xn_, lw.post_attn_norm, &xn_);
    AddInPlace(x_, xn_);
  }

  // Soft-capping (ggml's flash attention divides the scale by the cap and
  // applies cap * tanhf) and the sliding window of the layers that have
  // one.
  void ArchAttention(uint32_t layer, AttentionShape* shape) const {
    if (arch_.softcap) {
      shape->scale /= h_.attn_softcap;
      shape->softcap = h_.attn_softcap;
    }
    if (IsSwaLayer(h_, arch_, layer)) {
      shape->window = static_cast<int32_t>(h_.n_swa);
    }
  }

  // The router in the dense matmuls' orders (a MUL_MAT), the experts in
  // MUL_MAT_ID's (moe_ffn.h).
  void MixtureOfExperts(const LayerWeights& lw) {
    MatMul(lw.gate_inp, xn_, &gate_);
    const MoeRouting routing = RouteTokens(gate_, h_.n_expert, h_.n_expert_used,
                                           backend_.options().ggml_build);
    up_.resize(xn_.size());
    RunExperts(lw.experts, routing, xn_.data(), n_, h_.n_embd, backend_,
               up_.data());
    std::swap(xn_, up_);
  }

  void FeedForwardBlock(uint32_t layer) {
    const LayerWeights& lw = w_.layers[layer];
    Norm(x_, lw.ffn_norm, &xn_);
    if (!lw.experts.empty()) {
      MixtureOfExperts(lw);
      AddInPlace(x_, xn_);
      return;
    }
    MatMul(lw.w_gate, xn_, &gate_);
    MatMul(lw.w_up, xn_, &up_);
    // Per token: ggml's vector blocks restart at each row.
    for (size_t t = 0; t < n_; ++t) {
      float* gate = &gate_[t * h_.n_ff];
      if (arch_.gelu_ffn) {
        GeGlu(gate, &up_[t * h_.n_ff], h_.n_ff, gate);
      } else {
        backend_.SwiGlu(gate, &up_[t * h_.n_ff], h_.n_ff, gate);
      }
    }
    MatMul(lw.w_down, gate_, &xn_);
    if (arch_.post_norms) Norm(xn_, lw.post_ffn_norm, &xn_);
    AddInPlace(x_, xn_);
  }

  std::vector<float> Logits() {
    const size_t d = h_.n_embd;
    std::vector<float> wanted;  // [num_wanted, n_embd]
    for (size_t t = 0; t < n_; ++t) {
      if (!batch_[t].want_logits) continue;
      wanted.resize(wanted.size() + d);
      ggml_compat::RmsNorm(&x_[t * d], w_.output_norm.data(), d,
                           h_.rms_norm_eps, &wanted[wanted.size() - d]);
    }
    const size_t num_wanted = wanted.size() / d;
    std::vector<float> logits(num_wanted * w_.output.rows);
    // llama.cpp multiplies only the rows whose logits are wanted; with one
    // per sequence (a server's case) that is its single-token order.
    // Always taking it keeps a token's logits independent of which other
    // logits the batch asks for.
    const std::vector<kernels::DotOrder> orders(num_wanted,
                                                kernels::DotOrder::kGemv);
    if (num_wanted > 0) {
      backend_.MatMul(w_.output, wanted.data(), orders, logits.data());
    }
    if (arch_.softcap) {
      // ggml_scale by 1 / cap, ggml_tanh, ggml_scale by cap.
      const float cap = h_.final_softcap;
      const float inv = 1.0f / cap;
      for (float& v : logits) v = PortableTanh(v * inv) * cap;
    }
    return logits;
  }

  const LlamaHparams& h_;
  const LlamaWeights& w_;
  const ArchSpec& arch_;
  KvStorage* storage_;
  const ComputeBackend& backend_;
  std::span<const BatchToken> batch_;
  std::span<const CellId> cells_;
  std::vector<SeqCells> seqs_;
  std::vector<uint32_t> seq_of_;
  std::vector<Pos> positions_;
  RopeTable rope_;
  // The sliding-window layers' table where their RoPE differs
  // (ArchSpec::swa_rope_freq_base), else empty.
  std::optional<RopeTable> rope_swa_;
  std::vector<ggml_compat::DotOrder> orders_;       // [n_]
  std::vector<kernels::DotOrder> repacked_orders_;  // [n_]
  size_t n_;
  std::vector<float> x_;     // [n_, n_embd] residual stream
  std::vector<float> xn_;    // [n_, n_embd] normed input / block output
  std::vector<float> q_;     // [n_, n_head * head_dim_k]
  std::vector<float> k_;     // [n_, n_head_kv * head_dim_k]
  std::vector<float> v_;     // [n_, n_head_kv * head_dim_v]
  std::vector<float> att_;   // [n_, n_head * head_dim_v]
  std::vector<float> gate_;  // [n_, n_ff] (MoE: [n_, n_expert] router)
  std::vector<float> up_;    // [n_, n_ff] (MoE: [n_, n_embd] output)
};

}  // namespace

Status InferenceContext::DiscardRange(SeqId seq, Pos p0, Pos p1) {
  if (p0 < 0 || p1 <= p0) {
    return InvalidArgumentError("DiscardRange: [" + std::to_string(p0) + ", " +
                                std::to_string(p1) + ") is not a range");
  }
  KV_RETURN_IF_ERROR(cache_->RemoveRange(seq, p0, p1));
  // RoPE is a rotation by pos * theta_i: rotating a stored key by the
  // (negative) shift gives the key of the new position. The rotated cells
  // were just moved, so they lie in pages this sequence alone holds.
  const Pos delta = p0 - p1;
  const LlamaHparams& h = model_->hparams();
  KvStorage* storage = cache_->storage();
  if (storage != nullptr) {
    const Pos shift[1] = {delta};
    std::vector<RopeTable> ropes;  // per layer
    for (uint32_t layer = 0; layer < h.n_layer; ++layer) {
      const auto [base, scale] = LayerRope(h, model_->arch(), layer);
      ropes.emplace_back(shift, h.n_rot, base, scale,
                         model_->weights().rope_freqs);
    }
    std::vector<float> row(storage->layout().k_row_elems());
    std::span<const TokenPos> tokens = cache_->table().Cells(seq);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].pos < p1) continue;
      const CellId cell = cache_->table().CellAt(seq, i);
      for (uint32_t layer = 0; layer < h.n_layer; ++layer) {
        storage->Read(KvSide::kK, layer, cell, row);
        ropes[layer].Apply(model_->arch().rope_style, 0, row.data(),
                           h.n_head_kv, h.n_embd_head_k);
        storage->Write(KvSide::kK, layer, cell, row);
      }
    }
  }
  cache_->ShiftPositions(seq, p1, std::numeric_limits<Pos>::max(), delta);
  return Status::Ok();
}

StatusOr<std::vector<float>> InferenceContext::Decode(
    std::span<const BatchToken> batch) {
  KV_RETURN_IF_ERROR(ValidateBatch(batch));
  KV_ASSIGN_OR_RETURN(std::vector<CellId> cells, AppendBatch(batch));
  SeqGroups groups = GroupBySeq(batch);
  std::vector<SeqCells> seqs(groups.seqs.size());
  for (size_t s = 0; s < groups.seqs.size(); ++s) {
    const SeqId seq = groups.seqs[s];
    std::span<const TokenPos> tokens = cache_->table().Cells(seq);
    seqs[s].cells.reserve(tokens.size());
    seqs[s].positions.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      seqs[s].cells.push_back(cache_->table().CellAt(seq, i));
      seqs[s].positions.push_back(tokens[i].pos);
    }
  }
  ForwardPass pass(*model_, cache_->storage(), backend_, batch, cells,
                   std::move(seqs), std::move(groups.seq_of));
  return pass.Run();
}

}  // namespace kvault
