#include "kv/kv_policy.h"

#include <iterator>
#include <string>

namespace kvault {
namespace {

// The flag texts, indexed by KvPolicy.
constexpr std::string_view kPolicyNames[] = {"paged", "contiguous",
                                             "contiguous+defrag"};
static_assert(std::size(kPolicyNames) ==
              static_cast<size_t>(KvPolicy::kContiguousDefrag) + 1);

}  // namespace

StatusOr<KvPolicy> ParseKvPolicy(std::string_view text) {
  for (size_t i = 0; i < std::size(kPolicyNames); ++i) {
    if (text == kPolicyNames[i]) return static_cast<KvPolicy>(i);
  }
  return InvalidArgumentError(
      "kv_policy \"" + std::string(text) +
      "\" (expected paged, contiguous or contiguous+defrag)");
}

std::string_view KvPolicyName(KvPolicy policy) {
  return kPolicyNames[static_cast<size_t>(policy)];
}

}  // namespace kvault
