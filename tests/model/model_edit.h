// Test helpers: a small generated Llama model as a GGUF image, and the
// same model rebuilt after an edit of its metadata or tensors, so tests can
// make the malformed or other-architecture files a loader must handle.
#ifndef KVAULT_TESTS_MODEL_MODEL_EDIT_H_
#define KVAULT_TESTS_MODEL_MODEL_EDIT_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_file.h"
#include "model/gen_model.h"
#include "model/gguf_writer.h"
#include "model/llama_model.h"

namespace kvault {

// Returns a generated model (n_embd 64, 2 layers, 4 heads / 2 KV heads of
// 16, n_ff 96) with weights of `type`; with n_expert > 0 a mixture of
// n_expert experts of which n_expert_used run per token.
inline std::shared_ptr<std::string> GenImage(GgmlType type,
                                             uint32_t n_expert = 0,
                                             uint32_t n_expert_used = 0) {
  GenModelOptions options;
  options.n_expert = n_expert;
  options.n_expert_used = n_expert_used;
  options.n_embd = 64;
  options.n_layer = 2;
  options.n_head = 4;
  options.n_head_kv = 2;
  options.n_ff = 96;
  options.type = type;
  auto image = std::make_shared<std::string>();
  StringWritableFile out(image.get());
  EXPECT_TRUE(GenerateLlamaModel(options, &out).ok());
  return image;
}

// Returns the model in GGUF image `image`, validated as Load does.
inline StatusOr<std::unique_ptr<LlamaModel>> FromImage(
    std::shared_ptr<const std::string> image) {
  KV_ASSIGN_OR_RETURN(auto file, GgufFile::FromBuffer(std::move(image)));
  return LlamaModel::FromGguf(std::move(file));
}

// A change to a model's metadata or tensor list (infos and bytes, same
// order).
using Edit = std::function<void(std::vector<GgufMetadataEntry>*,
                                std::vector<GgufTensorInfo>*,
                                std::vector<std::string>*)>;

// Returns GGUF image `image` rebuilt after `edit`, parsed.
inline StatusOr<std::unique_ptr<GgufFile>> EditedGguf(
    std::shared_ptr<const std::string> image, const Edit& edit) {
  KV_ASSIGN_OR_RETURN(auto file, GgufFile::FromBuffer(std::move(image)));
  std::vector<GgufMetadataEntry> metadata = file->metadata();
  std::vector<GgufTensorInfo> tensors = file->tensors();
  std::vector<std::string> data;
  for (const auto& t : file->tensors()) {
    auto bytes = file->TensorData(t);
    data.emplace_back(reinterpret_cast<const char*>(bytes.data()),
                      bytes.size());
  }
  edit(&metadata, &tensors, &data);
  KV_ASSIGN_OR_RETURN(std::string edited,
                      BuildGgufImage(metadata, tensors, data));
  return GgufFile::FromBuffer(
      std::make_shared<const std::string>(std::move(edited)));
}

// Rebuilds the model of GGUF image `image` after `edit`, validated as Load
// does.
inline StatusOr<std::unique_ptr<LlamaModel>> EditedImage(
    std::shared_ptr<const std::string> image, const Edit& edit) {
  KV_ASSIGN_OR_RETURN(auto file, EditedGguf(std::move(image), edit));
  return LlamaModel::FromGguf(std::move(file));
}

// An edit renaming the architecture (and its keys) from llama to `arch`.
inline Edit Rename(const std::string& arch) {
  return [arch](std::vector<GgufMetadataEntry>* metadata, auto*, auto*) {
    for (auto& entry : *metadata) {
      if (entry.key == "general.architecture") {
        entry.value = GgufValue::String(arch);
      } else if (entry.key.rfind("llama.", 0) == 0) {
        entry.key = arch + "." + entry.key.substr(6);
      }
    }
  };
}

// Rebuilds a generated F32 model after `edit`.
inline StatusOr<std::unique_ptr<LlamaModel>> EditedModel(const Edit& edit) {
  return EditedImage(GenImage(GgmlType::kF32), edit);
}

// Returns the index of tensor `name` (a test failure when absent).
inline size_t IndexOf(const std::vector<GgufTensorInfo>& tensors,
                      const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return i;
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

}  // namespace kvault

#endif  // KVAULT_TESTS_MODEL_MODEL_EDIT_H_
