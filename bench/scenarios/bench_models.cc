#include "bench/scenarios/bench_models.h"

#include "model/demo_model.h"

namespace kvault::bench {

StatusOr<std::unique_ptr<LlamaModel>> LoadModelOrSmall(const std::string& path,
                                                       kernels::Isa isa) {
  if (!path.empty()) return LlamaModel::Load(path, LoadMode::kRead, isa);
  GenModelOptions g = DemoModelOptions();
  g.n_embd = 512, g.n_layer = 8, g.n_head = 8, g.n_head_kv = 4;
  g.n_ff = 1408, g.type = GgmlType::kQ8_0, g.n_ctx = 1u << 20;
  return GenerateModelInMemory(g);
}

}  // namespace kvault::bench
