#include "kv/pool_stats.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"

namespace kvault {

PoolStats ComputeStats(const PagePool& pool, const SequenceTable& table) {
  KV_CHECK(&table.pool() == &pool) << "table allocates from another pool";
  PoolStats stats;
  const uint64_t page_size = pool.page_size();
  stats.num_cells = pool.num_cells();
  stats.free_cells = uint64_t{pool.num_free_pages()} * page_size;
  stats.allocated_cells = stats.num_cells - stats.free_cells;
  stats.used_cells = table.num_used_cells();
  uint64_t largest_run = 0;
  for (const FreeRun& run : pool.FreeRuns()) {
    ++stats.num_free_runs;
    largest_run = std::max<uint64_t>(largest_run, run.num_pages);
  }
  stats.largest_free_run_cells = largest_run * page_size;
  if (stats.free_cells != 0) {
    stats.fragmentation =
        1.0 - static_cast<double>(stats.largest_free_run_cells) /
                  static_cast<double>(stats.free_cells);
  }
  for (SeqId id : table.SequenceIds()) {
    SequenceStats seq{id, table.Length(id), 0, 0};
    for (PageId page : table.Pages(id)) {
      ++seq.num_pages;
      if (pool.RefCount(page) > 1) ++seq.num_shared_pages;
    }
    stats.sequences.push_back(seq);
  }
  return stats;
}

std::string FormatPoolStats(const PoolStats& stats) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "cells %llu used %llu allocated %llu free %llu runs %llu "
                "largest_run %llu frag %.3f",
                static_cast<unsigned long long>(stats.num_cells),
                static_cast<unsigned long long>(stats.used_cells),
                static_cast<unsigned long long>(stats.allocated_cells),
                static_cast<unsigned long long>(stats.free_cells),
                static_cast<unsigned long long>(stats.num_free_runs),
                static_cast<unsigned long long>(stats.largest_free_run_cells),
                stats.fragmentation);
  return line;
}

}  // namespace kvault
