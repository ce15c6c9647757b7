#include "model/demo_model.h"

#include <string>
#include <utility>

#include "core/memory_file.h"
#include "model/gguf_file.h"

namespace kvault {

GenModelOptions DemoModelOptions() {
  GenModelOptions g;
  g.name = "kvault-demo (random weights)";
  g.n_embd = 256;
  g.n_layer = 4;
  g.n_head = 8;
  g.n_head_kv = 4;
  g.n_ff = 704;
  g.n_ctx = 4096;
  g.type = GgmlType::kF16;
  g.seed = 20261203;
  return g;
}

StatusOr<std::unique_ptr<LlamaModel>> GenerateModelInMemory(
    const GenModelOptions& options) {
  auto bytes = std::make_shared<std::string>();
  StringWritableFile out(bytes.get());
  KV_RETURN_IF_ERROR(GenerateLlamaModel(options, &out).status());
  KV_ASSIGN_OR_RETURN(auto file, GgufFile::FromBuffer(std::move(bytes)));
  return LlamaModel::FromGguf(std::move(file));
}

}  // namespace kvault
