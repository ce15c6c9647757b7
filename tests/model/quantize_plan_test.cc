#include "model/quantize_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/model_quantizer.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;
using TypeCounts = std::map<std::string, int>;

const std::string kDir =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models/kquant/st260K-x4.";

// The tensors of a Llama model as gen-model and convert_hf_to_gguf name
// them.
std::vector<PlanTensor> LlamaTensors(uint64_t e, uint64_t kv, uint64_t ff,
                                     uint64_t vocab, int layers,
                                     bool with_output = true) {
  std::vector<PlanTensor> t = {{"token_embd.weight", {e, vocab}}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {e}});
    t.push_back({p + "attn_q.weight", {e, e}});
    t.push_back({p + "attn_k.weight", {e, kv}});
    t.push_back({p + "attn_v.weight", {e, kv}});
    t.push_back({p + "attn_output.weight", {e, e}});
    t.push_back({p + "ffn_norm.weight", {e}});
    t.push_back({p + "ffn_gate.weight", {e, ff}});
    t.push_back({p + "ffn_down.weight", {ff, e}});
    t.push_back({p + "ffn_up.weight", {e, ff}});
  }
  t.push_back({"output_norm.weight", {e}});
  if (with_output) t.push_back({"output.weight", {e, vocab}});
  return t;
}

std::vector<PlannedType> Plan(const std::vector<PlanTensor>& t,
                              QuantizeModelShape shape, QuantizePlanOptions o) {
  StatusOr<std::vector<PlannedType>> plan = PlanQuantization(t, shape, o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : std::vector<PlannedType>{};
}

TypeCounts Count(const std::vector<PlannedType>& plan) {
  TypeCounts counts;
  for (const PlannedType& p : plan) ++counts[std::string(GgmlTypeName(p.type))];
  return counts;
}

QuantizePlanOptions Mix(const char* name) {
  QuantizePlanOptions o;
  o.ftype = *ParseQuantFileType(name);
  return o;
}

// The shared files were made by llama-quantize from st260K-x4.f32.gguf:
// the plan gives every tensor the type it has there.
TEST(QuantizePlanTest, MatchesSharedFilesTypeMix) {
  const std::string f32_path = kDir + "f32.gguf";
  if (!std::filesystem::exists(f32_path))
    GTEST_SKIP() << "missing " << f32_path;
  auto f32 = GgufFile::Open(f32_path);
  ASSERT_TRUE(f32.ok()) << f32.status();
  for (const char* mix :
       {"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_k_s", "q3_k_m",
        "q2_k", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs"}) {
    auto ref = GgufFile::Open(kDir + mix + ".gguf");
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto plan = PlanFileQuantization(**f32, Mix(mix));
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (size_t i = 0; i < plan->size(); ++i) {
      const GgufTensorInfo& t = (*f32)->tensors()[i];
      const GgufTensorInfo* want = (*ref)->FindTensor(t.name);
      ASSERT_NE(want, nullptr) << t.name;
      EXPECT_EQ((*plan)[i].type, want->type) << mix << " " << t.name;
    }
  }
}

// Type counts llama-quantize (b10573) chose for gen-model's
// --n-embd 256 --n-layer 16 --n-head 8 --n-head-kv 2 --n-ff 512 (GQA 4,
// use_more_bits over 16 layers).
TEST(QuantizePlanTest, SixteenLayersGqa4MatchLlamaQuantize) {
  const auto t = LlamaTensors(256, 64, 512, 259, 16);
  const QuantizeModelShape shape{"llama", 16, 8, 2, 0};
  const std::map<std::string, TypeCounts> want = {
      {"Q2_K",
       {{"f32", 33}, {"q2_K", 65}, {"q3_K", 32}, {"q4_K", 16}, {"q6_K", 1}}},
      {"Q3_K_S", {{"f32", 33}, {"q3_K", 113}, {"q6_K", 1}}},
      {"Q3_K_M",
       {{"f32", 33}, {"q3_K", 65}, {"q4_K", 45}, {"q5_K", 3}, {"q6_K", 1}}},
      {"Q3_K_L", {{"f32", 33}, {"q3_K", 65}, {"q5_K", 48}, {"q6_K", 1}}},
      {"Q4_K_S", {{"f32", 33}, {"q4_K", 107}, {"q5_K", 6}, {"q6_K", 1}}},
      {"Q4_K_M", {{"f32", 33}, {"q4_K", 97}, {"q6_K", 17}}},
      {"Q5_K_S", {{"f32", 33}, {"q5_K", 113}, {"q6_K", 1}}},
      {"Q5_K_M", {{"f32", 33}, {"q5_K", 97}, {"q6_K", 17}}},
      {"Q6_K", {{"f32", 33}, {"q6_K", 114}}},
      {"IQ4_NL", {{"f32", 33}, {"iq4_nl", 95}, {"q5_K", 18}, {"q6_K", 1}}},
      {"IQ4_XS", {{"f32", 33}, {"iq4_xs", 95}, {"q5_K", 18}, {"q6_K", 1}}},
      {"Q4_0", {{"f32", 33}, {"q4_0", 113}, {"q6_K", 1}}},
  };
  for (const auto& [mix, counts] : want) {
    EXPECT_EQ(Count(Plan(t, shape, Mix(mix.c_str()))), counts) << mix;
  }
}

// The same for --n-embd 320 --n-ff 640: no row is a multiple of 256, so
// the k and IQ4_XS types fall back.
TEST(QuantizePlanTest, FallbacksMatchLlamaQuantize) {
  const auto t = LlamaTensors(320, 80, 640, 259, 16);
  const QuantizeModelShape shape{"llama", 16, 8, 2, 0};
  const std::map<std::string, TypeCounts> want = {
      {"Q2_K", {{"f32", 33}, {"q4_0", 97}, {"q5_0", 16}, {"q8_0", 1}}},
      {"Q3_K_M",
       {{"f32", 33}, {"q4_0", 65}, {"q5_0", 45}, {"q5_1", 3}, {"q8_0", 1}}},
      {"Q4_K_S", {{"f32", 33}, {"q5_0", 107}, {"q5_1", 6}, {"q8_0", 1}}},
      {"Q4_K_M", {{"f32", 33}, {"q5_0", 97}, {"q8_0", 17}}},
      {"Q6_K", {{"f32", 33}, {"q8_0", 114}}},
      {"IQ4_XS", {{"f32", 33}, {"iq4_nl", 95}, {"q5_1", 18}, {"q8_0", 1}}},
  };
  for (const auto& [mix, counts] : want) {
    const auto plan = Plan(t, shape, Mix(mix.c_str()));
    EXPECT_EQ(Count(plan), counts) << mix;
    EXPECT_TRUE(plan[1].quantized == false && plan[2].fell_back) << mix;
  }
}

TEST(QuantizePlanTest, PureAndExplicitTypes) {
  const auto t = LlamaTensors(256, 256, 512, 300, 4);
  const QuantizeModelShape shape{"llama", 4, 4, 4, 0};
  QuantizePlanOptions o = Mix("Q4_K_M");
  o.pure = true;
  EXPECT_EQ(Count(Plan(t, shape, o)), (TypeCounts{{"f32", 9}, {"q4_K", 30}}));
  o.pure = false;
  o.output_tensor_type = GgmlType::kQ8_0;
  o.token_embedding_type = GgmlType::kF16;
  const auto plan = Plan(t, shape, o);
  EXPECT_EQ(plan.front().type, GgmlType::kF16);  // token_embd
  EXPECT_EQ(plan.back().type, GgmlType::kQ8_0);  // output
  // Explicit types skip the fallback: a bad one is the quantizer's error.
  o.output_tensor_type = GgmlType::kQ4_K;
  EXPECT_EQ(Plan(LlamaTensors(320, 320, 640, 300, 1), shape, o).back().type,
            GgmlType::kQ4_K);
}

TEST(QuantizePlanTest, TiedEmbeddingsGetTheOutputType) {
  const auto t = LlamaTensors(256, 256, 512, 300, 2, /*with_output=*/false);
  const auto plan = Plan(t, {"llama", 2, 4, 4, 0}, Mix("Q4_0"));
  EXPECT_EQ(plan.front().type, GgmlType::kQ6_K);
  EXPECT_EQ(Plan(t, {"llama", 2, 4, 4, 0}, Mix("Q8_0")).front().type,
            GgmlType::kQ8_0);
}

TEST(QuantizePlanTest, FloatMixesAndNoFallbackError) {
  const auto t = LlamaTensors(48, 48, 96, 300, 1);
  EXPECT_EQ(Count(Plan(t, {"llama", 1, 4, 4, 0}, Mix("bf16"))),
            (TypeCounts{{"f32", 3}, {"bf16", 9}}));
  // 48 is not a multiple of 32: q4_K -> q5_0 -> f16 ...
  QuantizePlanOptions o = Mix("Q4_K_M");
  o.output_tensor_type = GgmlType::kF16;
  EXPECT_EQ(Plan(t, {"llama", 1, 4, 4, 0}, o)[2].type, GgmlType::kF16);
  // ... but q8_0 (output.weight's type) has no fallback.
  auto bad = PlanQuantization(t, {"llama", 1, 4, 4, 0}, Mix("Q4_K_M"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().ToString(),
              HasSubstr("tensor output.weight has rows of 48 values"));
}

TEST(QuantizePlanTest, RefusesFalconAndExperts) {
  const auto t = LlamaTensors(256, 256, 512, 300, 1);
  EXPECT_FALSE(PlanQuantization(t, {"falcon", 1, 4, 4, 0}, Mix("Q4_0")).ok());
  EXPECT_FALSE(PlanQuantization(t, {"llama", 1, 4, 4, 8}, Mix("Q4_0")).ok());
}

TEST(QuantizePlanTest, ParsesMixNames) {
  EXPECT_EQ(*ParseQuantFileType("q4_k_m"), QuantFileType::kQ4_K_M);
  EXPECT_EQ(*ParseQuantFileType("Q4_K"), QuantFileType::kQ4_K_M);
  EXPECT_EQ(*ParseQuantFileType("q3_k"), QuantFileType::kQ3_K_M);
  EXPECT_EQ(*ParseQuantFileType("IQ4_xs"), QuantFileType::kIQ4_XS);
  EXPECT_EQ(QuantFileTypeName(QuantFileType::kQ5_K_S), "Q5_K_S");
  EXPECT_EQ(static_cast<uint32_t>(QuantFileType::kQ4_K_M), 15u);
  auto bad = ParseQuantFileType("q4_k_x");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().ToString(), HasSubstr("unknown quantization type"));
  EXPECT_EQ(*QuantFileTypeForBaseType(GgmlType::kQ4_K), QuantFileType::kQ4_K_M);
  EXPECT_FALSE(QuantFileTypeForBaseType(GgmlType::kIQ2_XS).ok());
}

TEST(QuantizePlanTest, LlamaQuantizeOrder) {
  const std::vector<PlanTensor> t = {
      {"token_embd.weight", {}},   {"blk.10.attn_q.weight", {}},
      {"blk.2.ffn_up.weight", {}}, {"blk.2.attn_k.weight", {}},
      {"output.weight", {}},       {"output_norm.weight", {}}};
  EXPECT_EQ(LlamaQuantizeOrder(t), (std::vector<size_t>{4, 5, 0, 3, 2, 1}));
}

}  // namespace
}  // namespace kvault
