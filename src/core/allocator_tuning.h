// How a long-running server keeps the C allocator (glibc malloc) from
// holding on to memory its requests freed: large blocks mapped and unmapped
// on their own, few arenas, and free pages inside the heaps handed back at
// most a few times a second.
#ifndef KVAULT_CORE_ALLOCATOR_TUNING_H_
#define KVAULT_CORE_ALLOCATOR_TUNING_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvault {

// Sets the allocator's thresholds for serving (call before threads start).
// glibc raises its mmap threshold after the first large free, after which
// blocks of megabytes come from per-thread arenas and stay there: 20
// refused 2 MB requests left ~10 MB behind on top of ~60 MB of arenas
// across the HTTP workers. A fixed threshold keeps such blocks mapped, the
// trim threshold returns the top of each heap, and a few arenas (HTTP
// workers mostly wait) keep free memory from spreading over one per thread.
void TuneAllocatorForServing();

// Returns free pages inside the heaps (not only at their tops) to the
// system, at most once per `interval` however often it is asked, so that
// requests which allocate tens of megabytes (a schema with thousands of
// values) leave no growth behind. Thread-safe.
class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(std::chrono::milliseconds interval)
      : interval_ns_(std::chrono::nanoseconds(interval).count()) {}

  // Trims when the last trim began at least `interval` ago (one caller
  // does it; the others return at once).
  void MaybeTrim();

 private:
  const int64_t interval_ns_;
  std::atomic<int64_t> next_ns_{0};  // steady-clock time of the next trim
};

}  // namespace kvault

#endif  // KVAULT_CORE_ALLOCATOR_TUNING_H_
