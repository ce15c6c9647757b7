// HugePageBuffer: a block of zeroed anonymous memory aligned to a 2 MiB
// huge page and advised onto transparent huge pages, for the big arrays a
// forward pass streams (model weights, the KV pool). With 4 KiB pages every
// 4 KiB of such a stream costs a TLB entry; a huge page covers 2 MiB.
// Pages are committed on first touch, as calloc's would be.
#ifndef KVAULT_CORE_HUGE_PAGE_BUFFER_H_
#define KVAULT_CORE_HUGE_PAGE_BUFFER_H_

#include <cstddef>

#include "core/status_or.h"

namespace kvault {

class HugePageBuffer {
 public:
  // The alignment of data() and the granularity of the mapping.
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  // Maps `num_bytes` of zeroed memory (a whole number of huge pages
  // behind it). ResourceExhausted names the size when the kernel refuses.
  // Zero bytes gives an empty buffer with a null data().
  static StatusOr<HugePageBuffer> Allocate(size_t num_bytes);

  HugePageBuffer() = default;
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  // Returns the first byte (null for an empty buffer).
  std::byte* data() const { return data_; }
  // Returns the size asked for.
  size_t size() const { return size_; }
  // Makes the memory read-only (writes then fault); IOError if refused.
  Status MakeReadOnly();
  // Makes the bytes writable again (after MakeReadOnly).
  Status MakeWritable();

 private:
  void Release();

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // size_ rounded up to whole huge pages
};

}  // namespace kvault

#endif  // KVAULT_CORE_HUGE_PAGE_BUFFER_H_
