#include "kv/eviction_policy.h"

#include <algorithm>

namespace kvault {
namespace {

class LruEvictionPolicy final : public EvictionPolicy {
 public:
  std::vector<SeqId> EvictionOrder(
      std::span<const SeqUsage> candidates) const override {
    std::vector<SeqUsage> idle;
    for (const SeqUsage& u : candidates) {
      if (!u.active) idle.push_back(u);
    }
    std::sort(idle.begin(), idle.end(),
              [](const SeqUsage& a, const SeqUsage& b) {
                if (a.last_use != b.last_use) return a.last_use < b.last_use;
                return a.seq < b.seq;
              });
    std::vector<SeqId> order;
    order.reserve(idle.size());
    for (const SeqUsage& u : idle) order.push_back(u.seq);
    return order;
  }
  std::string_view name() const override { return "lru"; }
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruEvictionPolicy() {
  return std::make_unique<LruEvictionPolicy>();
}

}  // namespace kvault
