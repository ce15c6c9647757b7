// Loading and validating Llama-family models: every tensor's name, shape
// and type is checked up front, with errors naming the tensor.
#include "model/llama_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_file.h"
#include "model/gen_model.h"
#include "model/gguf_writer.h"
#include "model/model_fingerprint.h"
#include "model_edit.h"

namespace kvault {
namespace {

const std::string kShared = std::string(KVAULT_SOURCE_DIR) + "/../shared";

TEST(LlamaModelTest, LoadsStories260K) {
  const std::string path = kShared + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << path;
  auto model = LlamaModel::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const LlamaHparams& h = (*model)->hparams();
  EXPECT_EQ(h.n_embd, 64u);
  EXPECT_EQ(h.n_layer, 5u);
  EXPECT_EQ(h.n_head, 8u);
  EXPECT_EQ(h.n_head_kv, 4u);
  EXPECT_EQ((*model)->n_vocab(), 512u);
  EXPECT_EQ((*model)->tokenizer().num_tokens(), 512u);
  EXPECT_EQ((*model)->arch().rope_style, RopeStyle::kNormal);
  EXPECT_EQ((*model)->weights().layers.size(), 5u);
  EXPECT_EQ((*model)->fingerprint(), ComputeModelFingerprint((*model)->file()));
  const KvLayout layout = (*model)->KvLayoutFor(KvDtype::kF16);
  EXPECT_EQ(layout.num_layers, 5u);
  EXPECT_EQ(layout.num_kv_heads, 4u);
  EXPECT_EQ(layout.head_dim_k, 8u);
  EXPECT_TRUE(layout.Validate().ok());
  EXPECT_GT((*model)->weight_bytes(), 260000u * 4 * 9 / 10);
}

TEST(LlamaModelTest, LoadsEveryGeneratedWeightType) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                        GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    auto model = FromImage(GenImage(type));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const LayerWeights& layer = (*model)->weights().layers[1];
    EXPECT_EQ(layer.wq.type, type);
    EXPECT_EQ(layer.wq.rows, 64);
    EXPECT_EQ(layer.wk.rows, 32);  // 2 KV heads of 16
    EXPECT_EQ(layer.w_down.cols, 96);
    EXPECT_EQ(layer.w_down.rows, 64);
    EXPECT_EQ(layer.attn_norm.size(), 64u);
    EXPECT_EQ((*model)->weights().token_embd.rows, (*model)->n_vocab());
  }
}

// A model read into memory gets its Q4_K matrices rewritten for the AVX-512
// and AVX2 kernels (kernels::WeightLayout::kGroups16), after its
// fingerprint; a mapped one and the token embedding keep GGUF's rows.
TEST(LlamaModelTest, ReadModelLaysOutQ4KForTheKernels) {
  const std::string path = kShared + "/models/kquant/st260K-x4.q4_k_m.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto read = LlamaModel::Load(path, LoadMode::kRead);
  auto mapped = LlamaModel::Load(path, LoadMode::kMmap);
  ASSERT_TRUE(read.ok() && mapped.ok());
  EXPECT_EQ((*read)->fingerprint().ToHex(), (*mapped)->fingerprint().ToHex());
  int num_q4k = 0;
  for (size_t l = 0; l < (*read)->weights().layers.size(); ++l) {
    const kernels::MatrixView& r = (*read)->weights().layers[l].wq;
    const kernels::MatrixView& m = (*mapped)->weights().layers[l].wq;
    EXPECT_EQ(m.layout, kernels::WeightLayout::kRows);
    if (r.type != GgmlType::kQ4_K) continue;
    ++num_q4k;
    const bool x86 = kernels::BestIsa() == kernels::Isa::kAvx512 ||
                     kernels::BestIsa() == kernels::Isa::kAvx2;
    EXPECT_EQ(r.layout, x86 ? kernels::WeightLayout::kGroups16
                            : kernels::WeightLayout::kRows);
  }
  EXPECT_GT(num_q4k, 0);
  EXPECT_EQ((*read)->weights().token_embd.layout, kernels::WeightLayout::kRows);
}

// The layout follows the kernels the model is loaded for: AVX-512's and
// AVX2's read Q4_K as kGroups16, the scalar ones kRows.
TEST(LlamaModelTest, LayoutFollowsTheLoadIsa) {
  const std::string path = kShared + "/models/kquant/st260K-x4.q4_k_m.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  for (kernels::Isa isa : kernels::SupportedIsas()) {
    const bool groups16 =
        isa == kernels::Isa::kAvx512 || isa == kernels::Isa::kAvx2;
    auto model = LlamaModel::Load(path, LoadMode::kRead, isa);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    for (const LayerWeights& l : (*model)->weights().layers) {
      EXPECT_EQ(l.wq.layout, groups16 && l.wq.type == GgmlType::kQ4_K
                                 ? kernels::WeightLayout::kGroups16
                                 : kernels::WeightLayout::kRows)
          << kernels::IsaName(isa);
    }
  }
}

TEST(LlamaModelTest, MissingOutputIsTiedToEmbedding) {
  auto model = EditedModel([](auto*, auto* tensors, auto* data) {
    const size_t i = IndexOf(*tensors, "output.weight");
    tensors->erase(tensors->begin() + i);
    data->erase(data->begin() + i);
  });
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_TRUE((*model)->weights().output_tied);
  EXPECT_EQ((*model)->weights().output.data,
            (*model)->weights().token_embd.data);
  // The embedding is the output matrix: a decode step reads all of it.
  EXPECT_EQ((*model)->decode_bytes(), (*model)->weight_bytes());
}

TEST(LlamaModelTest, DecodeBytesLeaveOutAnUntiedEmbedding) {
  auto model = FromImage(GenImage(GgmlType::kQ8_0));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const GgufFile& file = (*model)->file();
  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_GT(embd->size_bytes, 0u);
  EXPECT_EQ((*model)->decode_bytes(),
            (*model)->weight_bytes() - embd->size_bytes);
}

TEST(LlamaModelTest, ReadAndMappedLoadsGiveTheSameModel) {
  const std::shared_ptr<std::string> image = GenImage(GgmlType::kQ8_0);
  const std::string path = ::testing::TempDir() + "/kvault_load_modes.gguf";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(image->data(), static_cast<std::streamsize>(image->size()));
    ASSERT_TRUE(out.good());
  }
  auto mapped = LlamaModel::Load(path, LoadMode::kMmap);
  auto read = LlamaModel::Load(path, LoadMode::kRead);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*mapped)->fingerprint(), (*read)->fingerprint());
  const kernels::MatrixView& a = (*mapped)->weights().layers[1].w_down;
  const kernels::MatrixView& b = (*read)->weights().layers[1].w_down;
  ASSERT_EQ(a.rows * a.row_bytes, b.rows * b.row_bytes);
  EXPECT_NE(a.data, b.data);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.rows * a.row_bytes), 0);
  std::remove(path.c_str());
}

TEST(LlamaModelTest, MissingTensorIsNotFound) {
  auto model = EditedModel([](auto*, auto* tensors, auto* data) {
    const size_t i = IndexOf(*tensors, "blk.1.ffn_up.weight");
    tensors->erase(tensors->begin() + i);
    data->erase(data->begin() + i);
  });
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("blk.1.ffn_up.weight"),
            std::string::npos);
}

TEST(LlamaModelTest, WrongShapeIsInvalidArgument) {
  auto model = EditedModel([](auto*, auto* tensors, auto*) {
    auto& t = (*tensors)[IndexOf(*tensors, "blk.0.attn_k.weight")];
    std::swap(t.shape[0], t.shape[1]);  // same bytes, transposed shape
  });
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("blk.0.attn_k.weight"),
            std::string::npos);
  EXPECT_NE(model.status().message().find("expected"), std::string::npos);
}

TEST(LlamaModelTest, UnsupportedTypeIsUnimplemented) {
  auto model = EditedModel([](auto*, auto* tensors, auto* data) {
    const size_t i = IndexOf(*tensors, "blk.0.attn_q.weight");
    auto& t = (*tensors)[i];
    t.type = GgmlType::kMXFP4;  // 17 bytes per 32 values, no kernels
    (*data)[i].assign(t.shape[0] / 32 * 17 * t.shape[1], '\0');
  });
  EXPECT_EQ(model.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(model.status().message().find("mxfp4"), std::string::npos);
  EXPECT_NE(model.status().message().find("blk.0.attn_q.weight"),
            std::string::npos);
}

TEST(LlamaModelTest, UnsupportedArchitectureIsUnimplemented) {
  EXPECT_EQ(FindArchSpec("gpt2").status().code(), StatusCode::kUnimplemented);
  ASSERT_TRUE(FindArchSpec("qwen2").ok());
  EXPECT_EQ(FindArchSpec("qwen2")->rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(FindArchSpec("qwen2")->qkv_bias);
  EXPECT_TRUE(FindArchSpec("qwen3")->qk_norm);
}

// Turns the generated llama model into a qwen2 one (same keys under
// "qwen2."), optionally adding zero Q/K/V biases.
Edit ToQwen2(bool with_bias) {
  return [with_bias](auto* metadata, auto* tensors, auto* data) {
    for (auto& entry : *metadata) {
      if (entry.key == "general.architecture") {
        entry.value = GgufValue::String("qwen2");
      } else if (entry.key.rfind("llama.", 0) == 0) {
        entry.key = "qwen2." + entry.key.substr(6);
      }
    }
    if (!with_bias) return;
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = "blk." + std::to_string(layer) + ".";
      for (auto [name, size] : {std::pair{"attn_q.bias", 64},
                                {"attn_k.bias", 32},
                                {"attn_v.bias", 32}}) {
        GgufTensorInfo info;
        info.name = p + name;
        info.type = GgmlType::kF32;
        info.shape = {static_cast<uint64_t>(size)};
        tensors->push_back(info);
        data->push_back(std::string(size * 4, '\0'));
      }
    }
  };
}

TEST(LlamaModelTest, Qwen2NeedsBiasesAndUsesNeoxRope) {
  auto no_bias = EditedModel(ToQwen2(false));
  EXPECT_EQ(no_bias.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_bias.status().message().find("blk.0.attn_q.bias"),
            std::string::npos);
  auto model = EditedModel(ToQwen2(true));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->arch().rope_style, RopeStyle::kNeox);
  EXPECT_EQ((*model)->weights().layers[1].bq.size(), 64u);
  EXPECT_EQ((*model)->weights().layers[1].bk.size(), 32u);
  EXPECT_TRUE((*model)->weights().layers[1].q_norm.empty());
}

TEST(LlamaModelTest, LoadNamesThePath) {
  auto model = LlamaModel::Load("/nonexistent/kvault-model.gguf");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().ToString().find("/nonexistent/kvault-model.gguf"),
            std::string::npos);
}

}  // namespace
}  // namespace kvault
