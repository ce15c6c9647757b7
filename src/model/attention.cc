#include "model/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/float16.h"
#include "model/attention_batched.h"
#include "model/portable_tanh.h"

namespace kvault {
namespace {

// Reads the [offset, offset + n) slice of encoded K/V rows as floats or
// fp16 without decoding whole rows; Q8_0 slices are decoded block-wise.
class RowSlice {
 public:
  RowSlice(KvDtype dtype, uint64_t offset, uint64_t n,
           const ComputeBackend& backend)
      : backend_(backend), dtype_(dtype), offset_(offset), n_(n) {
    if (dtype_ == KvDtype::kQ8_0) {
      first_block_ = offset / kQ8_0BlockElems;
      const uint64_t end_block =
          (offset + n + kQ8_0BlockElems - 1) / kQ8_0BlockElems;
      tmp_.resize((end_block - first_block_) * kQ8_0BlockElems);
    }
  }

  // Returns q . slice(row); F16 in ggml_vec_dot_f16's order (q is then
  // fp16-rounded, as ggml converts it).
  float Dot(const std::byte* row, const float* q) {
    switch (dtype_) {
      case KvDtype::kF16:
        return backend_.DotF16(row + offset_ * 2, q, static_cast<int64_t>(n_));
      case KvDtype::kF32:
        return backend_.kernels().DotF32(F32(row), q, n_);
      default:
        return backend_.kernels().DotF32(DecodeQ8(row), q, n_);
    }
  }

  // y += s * slice(row).
  void Axpy(float s, const std::byte* row, float* y) {
    switch (dtype_) {
      case KvDtype::kF16:
        return AxpyHalfFused(s, row + offset_ * 2, y);
      case KvDtype::kF32:
        return backend_.kernels().Axpy(s, F32(row), n_, y);
      default:
        return backend_.kernels().Axpy(s, DecodeQ8(row), n_, y);
    }
  }

 private:
  // y[i] = fma(s, half(x[i]), y[i]): fused whatever kernel table is in use,
  // as ggml_vec_mad_f16 is (vector FMA; its tail contracted by GCC).
  void AxpyHalfFused(float s, const std::byte* x, float* y) const {
    for (uint64_t i = 0; i < n_; ++i) {
      uint16_t h;
      std::memcpy(&h, x + 2 * i, 2);
      y[i] = std::fma(s, HalfToFloat(h), y[i]);
    }
  }
  const float* F32(const std::byte* row) const {
    return reinterpret_cast<const float*>(row) + offset_;
  }
  const float* DecodeQ8(const std::byte* row) {
    const uint64_t num_blocks = tmp_.size() / kQ8_0BlockElems;
    DequantizeRowQ8_0(std::span(row + first_block_ * kQ8_0BlockBytes,
                                num_blocks * kQ8_0BlockBytes),
                      tmp_);
    return tmp_.data() + (offset_ - first_block_ * kQ8_0BlockElems);
  }

  const ComputeBackend& backend_;
  KvDtype dtype_;
  uint64_t offset_;
  uint64_t n_;
  uint64_t first_block_ = 0;
  std::vector<float> tmp_;
};

// Returns x rounded to the nearest fp16 value (ties to even), as a float:
// bit-identical to HalfToFloat(FloatToHalf(x)) (checked over 1/3 of all
// float bit patterns), but inline, since it runs per value per cell. Values
// in fp16's normal range round the mantissa to 10 bits; subnormal, overflowing
// and non-finite values take the exact slow path.
inline float RoundToHalf(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude < 0x38800000u || magnitude >= 0x477FE000u) {
    return HalfToFloat(FloatToHalf(x));
  }
  u += 0x00000FFFu + ((u >> 13) & 1u);
  return std::bit_cast<float>(u & 0xFFFFE000u);
}

#if defined(__x86_64__) && defined(__GNUC__)
// F16C's round trip is IEEE round-to-nearest-even in both directions, so it
// gives the same bits as the scalar RoundToHalf (as FloatToHalfRow's F16C
// path does) at 8 values per instruction; the scalar loop cost ~37% of a
// prefill before.
__attribute__((target("avx,f16c"))) void RoundToHalfF16c(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) x[i] = RoundToHalf(x[i]);
}
#endif

void RoundToHalf(float* x, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (Float16UsesF16c()) return RoundToHalfF16c(x, n);
#endif
  for (size_t i = 0; i < n; ++i) x[i] = RoundToHalf(x[i]);
}

// Attention of one batch token's query heads that share KV head `g`, with
// the online softmax llama.cpp's CPU flash attention uses
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk): one pass over the
// cells in logical order, rescaling the accumulator when the running max
// grows. With an F16 cache the query and the V accumulator are rounded to
// fp16 as ggml's kernel does (it keeps them in fp16), the dot products take
// ggml_vec_dot_f16's order and the sum update is fused: on the golden
// models this reproduces llama.cpp's log-probabilities to ~1e-5 over 64
// steps, where any one differing rounding costs up to 1e-2.
void AttendGroup(const KvStorage& storage, uint32_t layer,
                 const AttentionShape& s, const SeqCells& seq, Pos query_pos,
                 uint32_t g, const float* q, float* out,
                 const ComputeBackend& backend) {
  const uint32_t n_gqa = s.n_head / s.n_head_kv;
  const uint32_t dk = s.head_dim_k;
  const uint32_t dv = s.head_dim_v;
  const KvDtype dtype = storage.layout().dtype;
  const bool half = dtype == KvDtype::kF16;
  std::vector<float> qs(q, q + uint64_t{n_gqa} * dk);  // [n_gqa, dk]
  if (half) RoundToHalf(qs.data(), qs.size());
  std::vector<float> max(n_gqa, -INFINITY);
  std::vector<float> sum(n_gqa, 0.0f);
  std::fill(out, out + uint64_t{n_gqa} * dv, 0.0f);
  RowSlice k_slice(dtype, uint64_t{g} * dk, dk, backend);
  RowSlice v_slice(dtype, uint64_t{g} * dv, dv, backend);
  // Row addresses computed here rather than by Rows per cell (whose
  // bounds checks cost ~7% of a decode step); every cell id comes from the
  // sequence table, so it is in range.
  const uint64_t k_bytes = storage.layout().k_row_bytes();
  const uint64_t v_bytes = storage.layout().v_row_bytes();
  const std::byte* k_base =
      storage.Rows(KvSide::kK, layer, CellId(0), storage.num_cells()).data();
  const std::byte* v_base =
      storage.Rows(KvSide::kV, layer, CellId(0), storage.num_cells()).data();
  for (size_t i = 0; i < seq.cells.size(); ++i) {
    if (seq.positions[i] > query_pos) continue;  // causal mask
    if (s.window > 0 && query_pos - seq.positions[i] >= s.window) continue;
    const std::byte* k_row = k_base + seq.cells[i].value() * k_bytes;
    const std::byte* v_row = v_base + seq.cells[i].value() * v_bytes;
    for (uint32_t j = 0; j < n_gqa; ++j) {
      float* acc = out + uint64_t{j} * dv;
      float score = k_slice.Dot(k_row, &qs[uint64_t{j} * dk]) * s.scale;
      if (s.softcap != 0.0f) score = s.softcap * PortableTanh(score);
      float old_scale = 1.0f, weight = 1.0f;
      if (score > max[j]) {
        old_scale = std::exp(max[j] - score);
        max[j] = score;
        for (uint32_t d = 0; d < dv; ++d) acc[d] *= old_scale;
        if (half) RoundToHalf(acc, dv);
      } else {
        weight = std::exp(score - max[j]);
      }
      v_slice.Axpy(weight, v_row, acc);
      if (half) RoundToHalf(acc, dv);
      // Fused, as GCC compiles ggml's S = S*ms + vs.
      sum[j] = std::fma(sum[j], old_scale, weight);
    }
  }
  for (uint32_t j = 0; j < n_gqa; ++j) {
    const float inv = sum[j] == 0.0f ? 0.0f : 1.0f / sum[j];
    for (uint32_t d = 0; d < dv; ++d) out[uint64_t{j} * dv + d] *= inv;
  }
}

}  // namespace

void Attend(const KvStorage& storage, uint32_t layer,
            const AttentionShape& shape, std::span<const SeqCells> seqs,
            std::span<const uint32_t> seq_of, std::span<const Pos> query_pos,
            const float* q, float* out, const ComputeBackend& backend) {
  const uint32_t n_gqa = shape.n_head / shape.n_head_kv;
  const uint64_t q_stride = uint64_t{shape.n_head} * shape.head_dim_k;
  const uint64_t out_stride = uint64_t{shape.n_head} * shape.head_dim_v;
  // Handing out tasks costs microseconds; below this many (query head, cell)
  // pairs one thread is faster. Results do not depend on the choice.
  constexpr uint64_t kMinParallelWork = 1 << 16;
  uint64_t work = 0;
  for (uint32_t s : seq_of) work += seqs[s].cells.size() * shape.n_head;
  auto run = [&](size_t num_tasks, const std::function<void(size_t)>& task) {
    if (work >= kMinParallelWork) return backend.ParallelFor(num_tasks, task);
    for (size_t i = 0; i < num_tasks; ++i) task(i);
  };
  // The F16 fast path does this file's float operations in the same order
  // (see attention_batched.h), so taking it changes no result.
  const kernels::Isa isa = backend.options().isa;
  // The fast paths know neither soft-capping nor sliding windows.
  if (storage.layout().dtype == KvDtype::kF16 && shape.softcap == 0.0f &&
      shape.window == 0 && CanAttendGroupF16Fast(shape, isa)) {
    F16GroupRows rows;
    rows.k_base =
        storage.Rows(KvSide::kK, layer, CellId(0), storage.num_cells()).data();
    rows.v_base =
        storage.Rows(KvSide::kV, layer, CellId(0), storage.num_cells()).data();
    rows.k_row_bytes = storage.layout().k_row_bytes();
    rows.v_row_bytes = storage.layout().v_row_bytes();
    return AttendF16Fast(rows, shape,
                         F16AttendModeFor(isa, backend.options().ggml_build),
                         seqs, seq_of, query_pos, q, out, run);
  }
  run(seq_of.size() * shape.n_head_kv, [&](size_t index) {
    const size_t t = index / shape.n_head_kv;
    const uint32_t g = static_cast<uint32_t>(index % shape.n_head_kv);
    const uint64_t first_head = uint64_t{g} * n_gqa;
    AttendGroup(storage, layer, shape, seqs[seq_of[t]], query_pos[t], g,
                q + t * q_stride + first_head * shape.head_dim_k,
                out + t * out_stride + first_head * shape.head_dim_v, backend);
  });
}

}  // namespace kvault
