// EvictionPolicy: decides which resident sequences the vault spills, and in
// which order, when the KV pool needs room. It only orders candidates; the
// vault does the spilling and never evicts an active sequence, whatever the
// policy returns.
#ifndef KVAULT_KV_EVICTION_POLICY_H_
#define KVAULT_KV_EVICTION_POLICY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"

namespace kvault {

// What the policy may know of one resident sequence.
struct SeqUsage {
  SeqId seq;
  uint64_t last_use = 0;   // the vault's LRU clock at its last Touch (0: never)
  uint64_t num_cells = 0;  // cells it holds in the pool
  bool active = false;     // in use by a running request
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // Returns the sequences of `candidates` that may be evicted, in the order
  // they should go (first = evicted first). Never includes an active one.
  virtual std::vector<SeqId> EvictionOrder(
      std::span<const SeqUsage> candidates) const = 0;
  // Returns the policy's name, e.g. "lru".
  virtual std::string_view name() const = 0;
};

// Returns the default policy "lru": idle sequences only, least recently used
// first, ties by ascending sequence id.
std::unique_ptr<EvictionPolicy> MakeLruEvictionPolicy();

}  // namespace kvault

#endif  // KVAULT_KV_EVICTION_POLICY_H_
