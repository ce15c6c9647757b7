#include "bench/scenarios/decode_fragmentation.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace kvault::bench {

Status RunDecodeFragmentation(
    const DecodeFragmentationOptions& o,
    const std::function<void(const DecodeFragmentationRow&)>& on_row) {
  if (o.model_path.empty() || o.depths.empty() || o.page_sizes.empty() ||
      o.rounds == 0) {
    return InvalidArgumentError(
        "decode-fragmentation: need a model, depths, page sizes, rounds");
  }
  ModelBenchOptions base;
  base.model_path = o.model_path;
  base.num_prompt = 0;
  base.num_gen = o.num_gen;
  base.threads = o.threads;
  base.compute = o.compute;
  base.reps = o.reps;
  base.seed = o.seed;
  for (uint32_t page_size : o.page_sizes) {
    for (uint32_t depth : o.depths) {
      ModelBenchOptions run = base;
      run.page_size = page_size;
      run.depth = depth;
      // Rounds in A B B A order, so that load from other users of the
      // machine drifting during a pair hits both layouts alike.
      double sum[2] = {0, 0}, sq[2] = {0, 0};
      for (uint32_t round = 0; round < o.rounds; ++round) {
        for (int k = 0; k < 2; ++k) {
          const int frag = (round % 2 == 0) ? k : 1 - k;
          run.fragmented = frag == 1;
          KV_ASSIGN_OR_RETURN(ModelBenchResult r, RunModelBench(run));
          sum[frag] += r.tg_tok_s;
          sq[frag] += r.tg_std * r.tg_std;
        }
      }
      ModelBenchResult contiguous, fragmented;
      contiguous.tg_tok_s = sum[0] / o.rounds;
      fragmented.tg_tok_s = sum[1] / o.rounds;
      contiguous.tg_std = std::sqrt(sq[0] / o.rounds);
      fragmented.tg_std = std::sqrt(sq[1] / o.rounds);
      DecodeFragmentationRow row;
      row.page_size = page_size;
      row.depth = depth;
      row.contiguous_tok_s = contiguous.tg_tok_s;
      row.contiguous_std = contiguous.tg_std;
      row.fragmented_tok_s = fragmented.tg_tok_s;
      row.fragmented_std = fragmented.tg_std;
      row.slowdown_pct =
          100.0 * (1.0 - fragmented.tg_tok_s / contiguous.tg_tok_s);
      on_row(row);
    }
  }
  return Status::Ok();
}

std::string DecodeFragmentationJson(const DecodeFragmentationOptions& o,
                                    const DecodeFragmentationRow& row) {
  nlohmann::ordered_json j;
  j["model"] = o.model_path;
  j["n_gen"] = o.num_gen;
  j["threads"] = o.threads;
  j["reps"] = o.reps;
  j["rounds"] = o.rounds;
  j["page_size"] = row.page_size;
  j["depth"] = row.depth;
  j["contiguous_tok_s"] = row.contiguous_tok_s;
  j["contiguous_std"] = row.contiguous_std;
  j["fragmented_tok_s"] = row.fragmented_tok_s;
  j["fragmented_std"] = row.fragmented_std;
  j["slowdown_pct"] = row.slowdown_pct;
  return j.dump();
}

}  // namespace kvault::bench
