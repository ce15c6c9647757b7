// Micro-benchmarks of the forward-pass kernels: MatMul throughput per
// weight type, for decode (1 token: GB/s of weights) and prompt processing
// (64 tokens: GFLOP/s), at 1 and 2 threads, for each usable instruction
// set; activation quantization and exp per set; decode attention over a
// contiguous and a fragmented cache; the F32/F16 matmuls in each llama.cpp
// build's orders (BM_GgmlMatMul); plus the machine's memory-read
// bandwidth as the decode ceiling.
//
//   build-kern/bench/kernels_bench --benchmark_filter=MatMul
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/float16.h"
#include "core/huge_page_buffer.h"
#include "model/attention_batched.h"
#include "model/compute_backend.h"
#include "model/ggml_types.h"
#include "model/kernels/compute_pool.h"
#include "model/kernels/kernels.h"
#include "model/quantize.h"

namespace kvault::kernels {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,
                               GgmlType::kBF16, GgmlType::kQ8_0,
                               GgmlType::kQ4_0, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};

// A random rows x cols matrix of `type`, built once per shape, in the
// layout a model loaded for `isa` gets (kernels::PrefersGroups16).
struct BenchMatrix {
  std::vector<std::byte> bytes;  // [rows, row_bytes]
  MatrixView view;
};

BenchMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols,
                       Isa isa = Isa::kScalar) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  BenchMatrix m;
  const size_t row_bytes = GgmlRowBytes(type, cols).value();
  m.bytes.resize(row_bytes * rows);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    (void)QuantizeRow(type, row, {m.bytes.data() + r * row_bytes, row_bytes});
  }
  m.view = {type, rows, cols, m.bytes.data(), row_bytes};
  if (PrefersGroups16(m.view, isa)) RewriteAsGroups16(m.bytes, &m.view);
  return m;
}

// Args: type index, rows, tokens, threads, isa index (into SupportedIsas).
void BM_MatMul(benchmark::State& state) {
  const GgmlType type = kTypes[state.range(0)];
  const int64_t rows = state.range(1), cols = 2048;
  const int64_t num_tokens = state.range(2);
  const int64_t num_threads = state.range(3);
  const std::vector<Isa> isas = SupportedIsas();
  if (state.range(4) >= static_cast<int64_t>(isas.size())) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const Isa isa = isas[state.range(4)];
  const Kernels kernels(isa);
  const BenchMatrix m = MakeMatrix(type, rows, cols, isa);
  std::vector<float> x(num_tokens * cols, 0.5f), y(num_tokens * rows);
  std::unique_ptr<ComputePool> pool;
  if (num_threads > 1) pool = std::make_unique<ComputePool>(num_threads - 1);
  for (auto _ : state) {
    kernels.MatMul(m.view, x.data(), num_tokens, y.data(), pool.get());
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(
      2.0 * rows * cols * num_tokens * iters * 1e-9,
      benchmark::Counter::kIsRate);
  state.counters["WeightGBs"] = benchmark::Counter(
      static_cast<double>(m.bytes.size()) * iters * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(IsaName(isa)) + " " +
                 std::string(GgmlTypeName(type)) + " " + std::to_string(rows) +
                 "x" + std::to_string(cols) +
                 " t=" + std::to_string(num_tokens) +
                 " thr=" + std::to_string(num_threads));
}

void MatMulArgs(benchmark::internal::Benchmark* b) {
  for (int64_t isa = 1; isa <= 2; ++isa) {
    for (int64_t type = 0; type < std::ssize(kTypes); ++type) {
      for (int64_t rows : {2048, 5632}) {
        for (int64_t tokens : {1, 64}) {
          for (int64_t threads : {1, 2}) {
            b->Args({type, rows, tokens, threads, isa});
          }
        }
      }
    }
  }
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs)->UseRealTime()->MinTime(0.3);

// ComputeBackend::MatMul of F32/F16 weights (ggml_compat: llama.cpp's
// float orders) in each build's orders on this CPU's best kernels, so one
// run shows what reproducing the AVX-512 build costs next to the AVX2
// build's. Args: build (0 kAvx2, 1 kAvx512), type (0 F32, 1 F16), rows
// (x 2048 values), tokens (1: kGemv, decode; 64: kGemm, prefill), threads,
// AVX-512 forms (0: the AVX2 forms only, as ComputeBackendOptions's
// ggml_avx512 = false).
void BM_GgmlMatMul(benchmark::State& state) {
  const auto build = state.range(0) == 0 ? ggml_compat::GgmlBuild::kAvx2
                                         : ggml_compat::GgmlBuild::kAvx512;
  const GgmlType type = state.range(1) == 0 ? GgmlType::kF32 : GgmlType::kF16;
  const int64_t rows = state.range(2), cols = 2048;
  const int64_t num_tokens = state.range(3);
  const ComputeBackend backend(
      {.num_threads = static_cast<uint32_t>(state.range(4)),
       .ggml_avx512 = state.range(5) != 0,
       .ggml_build = build});
  const BenchMatrix m = MakeMatrix(type, rows, cols);
  std::vector<float> x(num_tokens * cols, 0.5f), y(num_tokens * rows);
  const std::vector<DotOrder> orders(
      num_tokens, num_tokens == 1 ? DotOrder::kGemv : DotOrder::kGemm);
  for (auto _ : state) {
    backend.MatMul(m.view, x.data(), orders, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * rows * cols * num_tokens * iters * 1e-9,
                         benchmark::Counter::kIsRate);
  state.counters["WeightGBs"] =
      benchmark::Counter(static_cast<double>(m.bytes.size()) * iters * 1e-9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(
      std::string(build == ggml_compat::GgmlBuild::kAvx2 ? "avx2-build "
                                                         : "avx512-build ") +
      std::string(GgmlTypeName(type)) + " " + std::to_string(rows) + "x" +
      std::to_string(cols) + " t=" + std::to_string(num_tokens) +
      " thr=" + std::to_string(state.range(4)) +
      (state.range(5) != 0 ? "" : " avx2-forms"));
}
BENCHMARK(BM_GgmlMatMul)
    ->ArgsProduct({{0, 1}, {0, 1}, {2048, 5632}, {1, 64}, {1, 2}, {0, 1}})
    ->UseRealTime()
    ->MinTime(0.3);

// Reads a 1 GiB buffer (split over `threads` threads) with the SIMD dot
// kernel (each element times itself): the memory-read bandwidth that
// bounds decode. Args: threads, huge pages (1: the buffer is advised onto
// transparent huge pages, as models read into memory are; 0: 4 KiB pages,
// as a mapped model file's).
void BM_MemoryRead(benchmark::State& state) {
  const size_t bytes = size_t{1} << 30;
  const int64_t num_threads = state.range(0);
  const size_t align = size_t{2} << 20;
  float* buf = static_cast<float*>(std::aligned_alloc(align, bytes));
  if (state.range(1) == 1) (void)madvise(buf, bytes, MADV_HUGEPAGE);
  if (state.range(1) == 0) (void)madvise(buf, bytes, MADV_NOHUGEPAGE);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  std::fill(buf, buf + n, 1.0f);  // touches every page
  std::vector<float> sums(num_threads);
  const Kernels kernels(BestIsa());
  auto sum_part = [&](int64_t part) {
    const int64_t part_n = n / num_threads;
    const float* p = buf + part * part_n;
    sums[part] = kernels.DotF32(p, p, part_n);
  };
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int64_t p = 1; p < num_threads; ++p) threads.emplace_back(sum_part, p);
    sum_part(0);
    for (std::thread& t : threads) t.join();
    benchmark::DoNotOptimize(sums.data());
  }
  std::free(buf);
  state.counters["GBs"] = benchmark::Counter(
      static_cast<double>(bytes) * state.iterations() * 1e-9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemoryRead)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->UseRealTime()->MinTime(2.0);

// Quantizing one layer's activations to Q8_0 (512 tokens x 2048), per ISA:
// the scalar loop was ~10% of a prefill before the SIMD version.
void BM_QuantizeQ8_0(benchmark::State& state) {
  const std::vector<Isa> isas = SupportedIsas();
  if (state.range(0) >= static_cast<int64_t>(isas.size())) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const Kernels kernels(isas[state.range(0)]);
  const int64_t n = 512 * 2048;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  std::vector<std::byte> q(n / 32 * 34);
  for (auto _ : state) {
    kernels.QuantizeQ8_0(x.data(), n, q.data());
    benchmark::DoNotOptimize(q.data());
  }
  state.SetLabel(std::string(IsaName(kernels.isa())));
  state.counters["Mvalues/s"] = benchmark::Counter(
      static_cast<double>(n) * state.iterations() * 1e-6,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_QuantizeQ8_0)->DenseRange(0, 2);

// e^x over 4096 values, per ISA (scalar = std::exp).
void BM_ExpF32(benchmark::State& state) {
  const std::vector<Isa> isas = SupportedIsas();
  if (state.range(0) >= static_cast<int64_t>(isas.size())) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const Kernels kernels(isas[state.range(0)]);
  std::vector<float> x(4096), y(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -0.01f * static_cast<float>(i);
  for (auto _ : state) {
    kernels.ExpF32(x.data(), static_cast<int64_t>(x.size()), y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(IsaName(kernels.isa())));
  state.counters["Mvalues/s"] = benchmark::Counter(
      static_cast<double>(x.size()) * state.iterations() * 1e-6,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ExpF32)->DenseRange(0, 2);

// Positions [0, num_cells) on pages of `page` cells: pages 0, 1, 2, ... or,
// when fragmented, the even pages; in shuffled order when `shuffled`.
SeqCells BenchSequence(uint32_t num_cells, uint32_t page, bool fragmented,
                       bool shuffled, std::mt19937* rng) {
  std::vector<uint32_t> pages(num_cells / page);
  for (uint32_t i = 0; i < pages.size(); ++i) pages[i] = fragmented ? 2 * i : i;
  if (shuffled) std::shuffle(pages.begin(), pages.end(), *rng);
  SeqCells seq;
  for (uint32_t p = 0; p < num_cells; ++p) {
    seq.cells.push_back(CellId(pages[p / page] * page + p % page));
    seq.positions.push_back(static_cast<Pos>(p));
  }
  return seq;
}

// One decode query's attention (fp16 cache, head size 64, two query heads
// per KV head) over 32 layers whose K/V (64 MiB) do not fit the last-level
// cache, as a decode step's do not once the weights have streamed through
// it; one thread. Args: layout, 0 contiguous, 1 the sequence's 16-cell
// pages every other page of a twice-as-large pool in ascending order (what
// the pool's lowest-first allocation gives kvault bench model
// --fragmented), 2 the same pages in shuffled order (the worst case: pages
// taken while other sequences free and take theirs); KV heads, 4 (the
// small bench shape, 2048 cells: each head reads a quarter of every row)
// or 1 (8192 cells: whole rows). q . k in the order of `build`'s
// ggml_vec_dot_f16 (BM_AttentionDecode: this CPU's native build's).
void AttentionDecode(benchmark::State& state, ggml_compat::GgmlBuild build) {
  const uint32_t num_kv_heads = static_cast<uint32_t>(state.range(1));
  const uint32_t num_layers = 32, depth = 8192 / num_kv_heads;
  const AttentionShape shape{2 * num_kv_heads, num_kv_heads, 64, 64, 0.125f};
  const uint64_t row_bytes = uint64_t{shape.n_head_kv} * 64 * 2;
  const bool fragmented = state.range(0) >= 1;
  const uint64_t pool_cells = fragmented ? 2 * depth : depth;
  std::mt19937 rng(5);
  const SeqCells seq =
      BenchSequence(depth, 16, fragmented, state.range(0) == 2, &rng);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // On huge pages, as KvStorage's pool.
  HugePageBuffer kv =
      HugePageBuffer::Allocate(2 * num_layers * pool_cells * row_bytes).value();
  auto* halves = reinterpret_cast<uint16_t*>(kv.data());
  for (size_t i = 0; i < kv.size() / 2; ++i) halves[i] = FloatToHalf(dist(rng));
  std::vector<float> q(shape.n_head * 64), out(shape.n_head * 64);
  for (float& v : q) v = dist(rng);
  const uint32_t seq_of[] = {0};
  const Pos query_pos[] = {static_cast<Pos>(depth - 1)};
  auto serial = [](size_t n, const std::function<void(size_t)>& fn) {
    for (size_t i = 0; i < n; ++i) fn(i);
  };
  const std::byte* base = kv.data();
  for (auto _ : state) {
    for (uint32_t l = 0; l < num_layers; ++l) {
      const std::byte* k = base + 2 * l * pool_cells * row_bytes;
      const F16GroupRows rows{k, k + pool_cells * row_bytes, row_bytes,
                              row_bytes};
      AttendF16Fast(rows, shape, F16AttendModeFor(BestIsa(), build),
                    std::span(&seq, 1), seq_of, query_pos, q.data(), out.data(),
                    serial);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["cells/s"] = benchmark::Counter(
      static_cast<double>(depth) * num_layers * state.iterations(),
      benchmark::Counter::kIsRate);
}
void BM_AttentionDecode(benchmark::State& state) {
  AttentionDecode(state, ggml_compat::NativeGgmlBuild());
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{0, 1, 2}, {1, 4}})
    ->UseRealTime()
    ->MinTime(2.0);

// BM_AttentionDecode in the AVX2 build's q . k order, whatever the CPU: on
// an AVX-512 machine, what the AVX-512 build's order costs.
void BM_AttentionDecodeAvx2Dot(benchmark::State& state) {
  AttentionDecode(state, ggml_compat::GgmlBuild::kAvx2);
}
BENCHMARK(BM_AttentionDecodeAvx2Dot)
    ->ArgsProduct({{0, 1, 2}, {1, 4}})
    ->UseRealTime()
    ->MinTime(2.0);

// The fixed cost of one ComputePool::ParallelFor fan-out (decode issues
// ~100 of them per token).
void BM_ParallelForOverhead(benchmark::State& state) {
  ComputePool pool(1);
  std::vector<int64_t> out(16);
  for (auto _ : state) {
    pool.ParallelFor(8, [&](size_t i) { out[i] += 1; });
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ParallelForOverhead);

}  // namespace
}  // namespace kvault::kernels
