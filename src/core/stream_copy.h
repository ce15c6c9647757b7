// CopyStreaming: a memcpy whose stores bypass the caches, for copies into
// memory nobody reads soon (a restore filling KV pages). An ordinary store
// first reads the destination's cache line; a streaming store does not, so
// a large copy moves a third fewer bytes through memory, which shows when
// several threads restore at once and memory bandwidth is what they share.
#ifndef KVAULT_CORE_STREAM_COPY_H_
#define KVAULT_CORE_STREAM_COPY_H_

#include <cstddef>

namespace kvault {

// Copies `num_bytes` from `src` to `dst` (not overlapping), with streaming
// stores where the CPU has them and `dst` is 16-byte aligned (memcpy
// otherwise). The stores are weakly ordered: call StreamingFence before
// another thread may read `dst`.
void CopyStreaming(void* dst, const void* src, size_t num_bytes);

// Orders every streaming store of this thread before its later stores.
void StreamingFence();

}  // namespace kvault

#endif  // KVAULT_CORE_STREAM_COPY_H_
