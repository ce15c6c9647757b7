// Helpers shared by the server tests: a tiny random model in memory (always
// available) and the path of the real stories260K model (may be missing).
#ifndef KVAULT_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define KVAULT_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/memory_file.h"
#include "model/gen_model.h"
#include "model/gguf_file.h"
#include "model/llama_model.h"

namespace kvault {

// Returns a random-weight model with the generated 259-token byte vocab.
inline std::unique_ptr<LlamaModel> MakeTinyModel(uint32_t n_ctx = 256) {
  GenModelOptions o;
  o.n_embd = 32;
  o.n_layer = 1;
  o.n_head = 2;
  o.n_ff = 64;
  o.n_ctx = n_ctx;
  o.seed = 7;
  std::string image;
  StringWritableFile out(&image);
  auto r = GenerateLlamaModel(o, &out);
  EXPECT_TRUE(r.ok()) << r.status();
  auto file = GgufFile::FromBuffer(
      std::make_shared<const std::string>(std::move(image)));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto model = LlamaModel::FromGguf(std::move(file).value());
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

// Returns the path of ../shared/models/stories260K.gguf.
inline std::string StoriesModelPath() {
  return std::string(KVAULT_SOURCE_DIR) + "/../shared/models/stories260K.gguf";
}

}  // namespace kvault

#endif  // KVAULT_TESTS_SERVER_SERVER_TEST_UTIL_H_
