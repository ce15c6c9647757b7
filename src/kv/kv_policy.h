// KvPolicy: how a KvCache places a sequence's pages (--kv-policy). The flag
// text is parsed once, where options are read; everything below compares
// the enum.
#ifndef KVAULT_KV_KV_POLICY_H_
#define KVAULT_KV_KV_POLICY_H_

#include <cstdint>
#include <string_view>

#include "core/status_or.h"

namespace kvault {

// kContiguousDefrag stays last: kv_policy.cc indexes its names by value.
enum class KvPolicy : uint8_t {
  kPaged,             // "paged": any free pages
  kContiguous,        // "contiguous": one run of free pages (llama.cpp's)
  kContiguousDefrag,  // "contiguous+defrag": a failed placement defragments
};

// Parses "paged", "contiguous" or "contiguous+defrag"; InvalidArgument
// naming the text and the expected values for anything else.
StatusOr<KvPolicy> ParseKvPolicy(std::string_view text);
// Returns the text ParseKvPolicy takes for `policy`.
std::string_view KvPolicyName(KvPolicy policy);

}  // namespace kvault

#endif  // KVAULT_KV_KV_POLICY_H_
