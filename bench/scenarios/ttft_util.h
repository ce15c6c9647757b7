// Helpers of the time-to-first-token scenarios (restore_vs_recompute.h,
// prefix_tiers.h): a chunked prefill of one sequence, medians, timers.
#ifndef KVAULT_BENCH_SCENARIOS_TTFT_UTIL_H_
#define KVAULT_BENCH_SCENARIOS_TTFT_UTIL_H_

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "model/inference.h"

namespace kvault::bench {

using TtftClock = std::chrono::steady_clock;

// Returns the milliseconds since `t0`.
inline double MsSince(TtftClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(TtftClock::now() - t0)
      .count();
}

// Returns the median of the non-empty `v`.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Decodes tokens[0, n) of `seq` at positions [first_pos, first_pos + n) in
// chunks of `chunk`, with logits for the last.
inline Status Prefill(InferenceContext* ctx, SeqId seq,
                      std::span<const TokenId> tokens, uint32_t chunk,
                      Pos first_pos = 0) {
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t end = std::min(tokens.size(), begin + chunk);
    std::vector<BatchToken> batch;  // [end - begin]
    for (size_t i = begin; i < end; ++i) {
      batch.push_back({seq, tokens[i], static_cast<Pos>(first_pos + i),
                       i + 1 == tokens.size()});
    }
    KV_RETURN_IF_ERROR(ctx->Decode(batch).status());
  }
  return Status::Ok();
}

}  // namespace kvault::bench

#endif  // KVAULT_BENCH_SCENARIOS_TTFT_UTIL_H_
