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

TEST(QuantizePlanTest, RefusesFalcon) {
  const auto t = LlamaTensors(256, 256, 512, 300, 1);
  EXPECT_FALSE(PlanQuantization(t, {"falcon", 1, 4, 4, 0}, Mix("Q4_0")).ok());
}

// Type counts llama-quantize (b10573) chose for ../shared/models/arch's
// mixtral.f32 (4 experts: the dense rules) and qwen3moe.f32 (8 experts:
// attn_k and attn_v q8_0, attn_output q5_K for the low mixes); n_ff 128
// and 64 make the expert tensors fall back.
TEST(QuantizePlanTest, MixtureOfExpertsFilesMatchLlamaQuantize) {
  const std::string dir =
      std::string(KVAULT_SOURCE_DIR) + "/../shared/models/arch/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing " << dir;
  using Counts = std::map<std::string, TypeCounts>;
  const std::map<std::string, Counts> want = {
      {"mixtral",
       {{"Q2_K",
         {{"f32", 7}, {"q2_K", 9}, {"q3_K", 4}, {"q4_0", 2}, {"q6_K", 1}}},
        {"Q3_K_L",
         {{"f32", 7}, {"q3_K", 9}, {"q5_1", 2}, {"q5_K", 4}, {"q6_K", 1}}},
        {"Q4_K_M",
         {{"f32", 7}, {"q4_K", 12}, {"q5_0", 1}, {"q6_K", 2}, {"q8_0", 1}}},
        {"IQ4_XS", {{"f32", 7}, {"iq4_nl", 2}, {"iq4_xs", 13}, {"q6_K", 1}}},
        {"Q8_0", {{"f32", 7}, {"q8_0", 16}}}}},
      {"qwen3moe",
       {{"Q2_K",
         {{"f32", 11},
          {"q2_K", 7},
          {"q4_0", 2},
          {"q5_K", 2},
          {"q6_K", 1},
          {"q8_0", 4}}},
        {"Q3_K_L",
         {{"f32", 11}, {"q3_K", 9}, {"q5_1", 2}, {"q6_K", 1}, {"q8_0", 4}}},
        {"Q4_K_M",
         {{"f32", 11},
          {"q4_K", 7},
          {"q5_0", 1},
          {"q5_K", 2},
          {"q6_K", 1},
          {"q8_0", 5}}},
        {"Q4_K_S",
         {{"f32", 11},
          {"q4_K", 7},
          {"q5_0", 2},
          {"q5_K", 2},
          {"q6_K", 1},
          {"q8_0", 4}}},
        {"Q4_0", {{"f32", 11}, {"q4_0", 11}, {"q6_K", 1}, {"q8_0", 4}}},
        {"Q6_K", {{"f32", 11}, {"q6_K", 10}, {"q8_0", 6}}}}},
  };
  for (const auto& [model, mixes] : want) {
    auto f32 = GgufFile::Open(dir + model + ".f32.gguf");
    ASSERT_TRUE(f32.ok()) << f32.status();
    for (const auto& [mix, counts] : mixes) {
      auto plan = PlanFileQuantization(**f32, Mix(mix.c_str()));
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(Count(*plan), counts) << model << " " << mix;
    }
  }
}

// Which tensors get which type, for Q4_K_M of an 8-expert model: the
// ffn_down layer comes from the name.
TEST(QuantizePlanTest, EightExpertsQ4_K_MTensorByTensor) {
  std::vector<PlanTensor> t = {{"token_embd.weight", {256, 300}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_k.weight", {256, 128}});
    t.push_back({p + "attn_output.weight", {256, 256}});
    t.push_back({p + "attn_v.weight", {256, 128}});
    t.push_back({p + "ffn_down_exps.weight", {512, 256, 8}});
    t.push_back({p + "ffn_gate_exps.weight", {256, 512, 8}});
    t.push_back({p + "ffn_gate_inp.weight", {256, 8}});
  }
  t.push_back({"output.weight", {256, 300}});
  const auto plan = Plan(t, {"llama", 2, 4, 2, 8}, Mix("Q4_K_M"));
  const std::vector<GgmlType> want = {
      GgmlType::kQ4_K,                   // token_embd
      GgmlType::kQ8_0, GgmlType::kQ5_K,  // blk.0 attn_k, attn_output
      GgmlType::kQ8_0, GgmlType::kQ4_K,  // attn_v, ffn_down_exps (layer 0)
      GgmlType::kQ4_K, GgmlType::kF32,   // ffn_gate_exps, ffn_gate_inp
      GgmlType::kQ8_0, GgmlType::kQ5_K,  // blk.1
      GgmlType::kQ8_0, GgmlType::kQ6_K,  // ffn_down_exps: layer 1 of 2
      GgmlType::kQ4_K, GgmlType::kF32,   //
      GgmlType::kQ6_K};                  // output
  ASSERT_EQ(plan.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(plan[i].type, want[i]) << t[i].name;
  }
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
