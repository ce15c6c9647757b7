// Micro-benchmarks of the KV bookkeeping on a 1M-cell pool.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kv/defrag_planner.h"
#include "kv/page_pool.h"

namespace kvault {
namespace {

constexpr uint32_t kNumCells = 1u << 20;

// Allocates and frees `n` pages at a time from a 1M-page pool.
void BM_PagePoolAllocateFree(benchmark::State& state) {
  auto pool = PagePool::Create(kNumCells, 1);
  uint32_t n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    std::vector<PageId> pages = pool->Allocate(n);
    for (PageId p : pages) pool->Unref(p);
    benchmark::DoNotOptimize(pages.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_PagePoolAllocateFree)->Arg(1)->Arg(256)->Arg(8192);

// First-fit run search on a pool where every other page is taken.
void BM_PagePoolFindFreeRun(benchmark::State& state) {
  auto pool = PagePool::Create(kNumCells, 1);
  std::vector<PageId> all = pool->Allocate(kNumCells);
  for (uint32_t i = 0; i < kNumCells; i += 2) pool->Unref(all[i]);
  pool->Unref(all[kNumCells - 1]);
  for (auto _ : state) benchmark::DoNotOptimize(pool->FindFreeRun(2));
}
BENCHMARK(BM_PagePoolFindFreeRun);

// Plans a defrag of 1M cells held by 256 sequences interleaved page by page.
void BM_PlanDefrag(benchmark::State& state) {
  uint32_t page_size = static_cast<uint32_t>(state.range(0));
  uint32_t num_pages = kNumCells / page_size;
  DefragInput input{num_pages, page_size, {}};
  input.seq_pages.resize(256);
  std::mt19937 rng(7);
  for (uint32_t p = 0; p < num_pages; ++p) {
    if (rng() % 2 == 0) input.seq_pages[rng() % 256].push_back(PageId(p));
  }
  uint64_t moved = 0;
  for (auto _ : state) moved = PlanDefrag(input).cells_moved;
  state.counters["cells_moved"] = static_cast<double>(moved);
}
BENCHMARK(BM_PlanDefrag)->Arg(1)->Arg(16)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvault
