#include "core/allocator_tuning.h"

#include <malloc.h>

namespace kvault {

void TuneAllocatorForServing() {
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  mallopt(M_ARENA_MAX, 4);
}

void MemoryTrimmer::MaybeTrim() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_ns_.load(std::memory_order_relaxed);
  if (now < next) return;
  if (!next_ns_.compare_exchange_strong(next, now + interval_ns_)) return;
  malloc_trim(0);
}

}  // namespace kvault
