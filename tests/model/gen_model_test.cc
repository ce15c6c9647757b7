#include "model/gen_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "core/memory_file.h"
#include "model/arch_spec.h"
#include "model/gguf_file.h"
#include "model/llama_hparams.h"
#include "model/llama_model.h"
#include "model/model_fingerprint.h"
#include "model/quantize.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

GenModelOptions Options(GgmlType type = GgmlType::kF32, uint64_t seed = 1) {
  GenModelOptions o;
  o.name = "test-model";
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 96;
  o.n_ctx = 512;
  o.type = type;
  o.seed = seed;
  return o;
}

std::string Generate(const GenModelOptions& options) {
  std::string image;
  StringWritableFile out(&image);
  auto r = GenerateLlamaModel(options, &out);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) {
    EXPECT_EQ(r->file_bytes, image.size());
  }
  return image;
}

std::unique_ptr<GgufFile> ParseOrDie(const std::string& image) {
  auto f = GgufFile::FromBuffer(std::make_shared<const std::string>(image));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(f).value() : nullptr;
}

std::vector<float> Values(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  std::vector<float> out(t->num_elements);
  EXPECT_TRUE(DequantizeRow(t->type, f.TensorData(*t), out).ok());
  return out;
}

TEST(GenModelTest, TensorNamesShapesAndMetadata) {
  auto f = ParseOrDie(Generate(Options()));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetString("general.name"), "test-model");
  EXPECT_EQ(*f->GetUint("general.alignment"), 32u);
  EXPECT_EQ(*f->GetUint("general.file_type"), 0u);
  auto h = ReadLlamaHparams(*f);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->n_embd, 64u);
  EXPECT_EQ(h->n_layer, 2u);
  EXPECT_EQ(h->n_head, 4u);
  EXPECT_EQ(h->n_head_kv, 2u);
  EXPECT_EQ(h->n_ff, 96u);
  EXPECT_EQ(h->n_ctx_train, 512u);
  EXPECT_EQ(h->n_rot, 16u);
  EXPECT_EQ(h->n_vocab, 259u);
  EXPECT_FLOAT_EQ(h->rms_norm_eps, 1e-5f);
  using Shape = std::vector<uint64_t>;
  std::vector<std::pair<std::string, Shape>> want = {
      {"token_embd.weight", {64, 259}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    want.push_back({p + "attn_norm.weight", {64}});
    want.push_back({p + "attn_q.weight", {64, 64}});
    want.push_back({p + "attn_k.weight", {64, 32}});
    want.push_back({p + "attn_v.weight", {64, 32}});
    want.push_back({p + "attn_output.weight", {64, 64}});
    want.push_back({p + "ffn_norm.weight", {64}});
    want.push_back({p + "ffn_gate.weight", {64, 96}});
    want.push_back({p + "ffn_down.weight", {96, 64}});
    want.push_back({p + "ffn_up.weight", {64, 96}});
  }
  want.push_back({"output_norm.weight", {64}});
  want.push_back({"output.weight", {64, 259}});
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f->tensors()[i].name, want[i].first);
    EXPECT_EQ(f->tensors()[i].shape, want[i].second) << want[i].first;
    EXPECT_EQ(f->tensors()[i].type, GgmlType::kF32);
  }
}

TEST(GenModelTest, ByteVocab) {
  auto f = ParseOrDie(Generate(Options()));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  auto tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 259u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[3 + 0xAB], "<0xAB>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  auto types = *f->GetIntArray("tokenizer.ggml.token_type");
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[2], 3);
  EXPECT_EQ(types[100], 6);
  EXPECT_EQ(f->GetFloatArray("tokenizer.ggml.scores")->size(), 259u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
}

TEST(GenModelTest, WeightStatistics) {
  auto f = ParseOrDie(Generate(Options()));
  ASSERT_NE(f, nullptr);
  for (const char* norm : {"blk.0.attn_norm.weight", "output_norm.weight"}) {
    for (float v : Values(*f, norm)) ASSERT_EQ(v, 1.0f) << norm;
  }
  const std::vector<float> w = Values(*f, "token_embd.weight");  // 16576
  double sum = 0, sum_sq = 0;
  for (float v : w) {
    sum += v;
    sum_sq += double{v} * v;
  }
  const double mean = sum / w.size();
  const double std = std::sqrt(sum_sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);  // 4 standard errors
  EXPECT_NEAR(std, 0.02, 0.0005);
  // Two tensors get different streams.
  EXPECT_NE(Values(*f, "blk.0.attn_q.weight"),
            Values(*f, "blk.1.attn_q.weight"));
}

TEST(GenModelTest, DeterministicForASeed) {
  const std::string a = Generate(Options(GgmlType::kF32, 7));
  EXPECT_EQ(a, Generate(Options(GgmlType::kF32, 7)));
  const std::string b = Generate(Options(GgmlType::kF32, 8));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
  EXPECT_NE(ComputeModelFingerprint(*ParseOrDie(a)),
            ComputeModelFingerprint(*ParseOrDie(b)));
  // The stream is our own, so its first values are fixed facts.
  std::vector<float> first(2);
  FillStandardNormal(7, "token_embd.weight", first);
  EXPECT_FLOAT_EQ(Values(*ParseOrDie(a), "token_embd.weight")[0],
                  0.02f * first[0]);
}

TEST(GenModelTest, QuantizedTypesDequantizeCloseToF32) {
  auto ref = ParseOrDie(Generate(Options(GgmlType::kF32, 3)));
  ASSERT_NE(ref, nullptr);
  struct Case {
    GgmlType type;
    uint32_t file_type;
    float tolerance;  // weights are N(0, 0.02): |w| < 0.1 in practice
  };
  for (const Case& c : {Case{GgmlType::kF16, 1, 1e-4f},
                        Case{GgmlType::kQ8_0, 7, 0.1f / 127 + 1e-4f},
                        Case{GgmlType::kQ4_0, 2, 0.1f / 8 + 1e-3f}}) {
    auto f = ParseOrDie(Generate(Options(c.type, 3)));
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(*f->GetUint("general.file_type"), c.file_type);
    for (const GgufTensorInfo& t : f->tensors()) {
      const bool is_norm = t.shape.size() == 1;
      EXPECT_EQ(t.type, is_norm ? GgmlType::kF32 : c.type) << t.name;
      const std::vector<float> want = Values(*ref, t.name);
      const std::vector<float> got = Values(*f, t.name);
      float worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(want[i] - got[i]));
      }
      EXPECT_LE(worst, c.tolerance) << t.name << " " << GgmlTypeName(c.type);
    }
  }
}

TEST(GenModelTest, CopiesTokenizerFromAVocabFile) {
  const std::string vocab = std::string(KVAULT_SOURCE_DIR) +
                            "/../shared/vocab/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(vocab)) {
    GTEST_SKIP() << "shared test file " << vocab << " is missing";
  }
  GenModelOptions o = Options();
  o.n_layer = 1;
  o.vocab = vocab;
  auto f = ParseOrDie(Generate(o));
  ASSERT_NE(f, nullptr);
  auto src = GgufFile::Open(vocab);
  ASSERT_TRUE(src.ok());
  int copied = 0;
  for (const GgufMetadataEntry& e : (*src)->metadata()) {
    if (!e.key.starts_with("tokenizer.")) continue;
    const GgufValue* v = f->Find(e.key);
    ASSERT_NE(v, nullptr) << e.key;
    EXPECT_TRUE(*v == e.value) << e.key;
    ++copied;
  }
  EXPECT_GE(copied, 8);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->shape,
            (std::vector<uint64_t>{64, 32000}));
  EXPECT_EQ(ReadLlamaHparams(*f)->n_vocab, 32000u);
}

TEST(GenModelTest, RejectsBadOptions) {
  std::string sink;
  StringWritableFile out(&sink);
  auto expect = [&](GenModelOptions o, StatusCode code, const char* what) {
    Status s = GenerateLlamaModel(o, &out).status();
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(s.ToString(), HasSubstr(what));
  };
  GenModelOptions o = Options();
  o.type = GgmlType::kIQ2_XS;
  expect(o, StatusCode::kInvalidArgument, "iq2_xs");
  o = Options(GgmlType::kQ4_K);  // n_embd 64 < 256
  expect(o, StatusCode::kInvalidArgument, "multiples of 256");
  o = Options(GgmlType::kQ8_0);
  o.n_ff = 100;
  expect(o, StatusCode::kInvalidArgument, "multiples of 32");
  o = Options();
  o.n_head = 3;
  expect(o, StatusCode::kInvalidArgument, "not a multiple of n_head 3");
  o = Options();
  o.n_head_kv = 3;
  expect(o, StatusCode::kInvalidArgument, "n_head_kv 3");
  o = Options();
  o.n_layer = 0;
  expect(o, StatusCode::kInvalidArgument, "n_layer must be > 0");
  o = Options();
  o.n_expert = 4;
  o.n_expert_used = 5;
  expect(o, StatusCode::kInvalidArgument, "more experts used than there are");
  o.arch = "qwen2";
  expect(o, StatusCode::kInvalidArgument, "qwen2 cannot have 4 experts");
  o = Options();
  o.vocab = "/nonexistent/vocab.gguf";
  expect(o, StatusCode::kNotFound, "/nonexistent/vocab.gguf");
}

TEST(GenModelTest, EveryArchitectureLoadsWithItsFeatureTensors) {
  for (const ArchSpec& spec : AllArchSpecs()) {
    SCOPED_TRACE(std::string(spec.name));
    GenModelOptions o = Options();
    o.arch = std::string(spec.name);
    const bool moe = spec.moe == MoeSupport::kRequired;
    if (moe) {
      o.n_expert = 4;
      o.n_expert_used = 2;
    }
    auto image = std::make_shared<const std::string>(Generate(o));
    auto file = GgufFile::FromBuffer(image);
    ASSERT_TRUE(file.ok()) << file.status();
    const GgufFile& f = **file;
    auto has = [&](const char* name) { return f.FindTensor(name) != nullptr; };
    EXPECT_EQ(has("blk.1.attn_qkv.weight"), spec.fused_qkv);
    EXPECT_EQ(has("blk.1.attn_q.weight"), !spec.fused_qkv);
    EXPECT_EQ(has("blk.1.ffn_gate.weight"), !spec.fused_gate_up && !moe);
    EXPECT_EQ(has("blk.1.ffn_gate_exps.weight"), moe);
    EXPECT_EQ(has("blk.1.attn_k.bias"), spec.qkv_bias);
    EXPECT_EQ(has("blk.1.attn_k_norm.weight"), spec.qk_norm);
    EXPECT_EQ(has("blk.1.post_ffw_norm.weight"), spec.post_norms);
    EXPECT_EQ(has("output.weight"), !spec.embed_scale);
    const std::string a = std::string(spec.name) + ".";
    EXPECT_EQ(f.Has(a + "attention.sliding_window"), spec.swa_pattern > 0);
    EXPECT_EQ(f.Has(a + "final_logit_softcapping"), spec.softcap);
    auto model = LlamaModel::FromGguf(std::move(file).value());
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->arch().name, spec.name);
  }
}

TEST(GenModelTest, RopeFreqsHoldLlama31Divisors) {
  GenModelOptions o = Options();
  o.n_embd = 256;  // head dim 64: 32 pairs
  o.rope_freq_base = 500000.0f;
  o.rope_freqs = true;
  auto f = ParseOrDie(Generate(o));
  ASSERT_NE(f, nullptr);
  const std::vector<float> factors = Values(*f, "rope_freqs.weight");
  ASSERT_EQ(factors.size(), 32u);
  EXPECT_EQ(factors.front(), 1.0f);  // short wavelengths keep their speed
  EXPECT_EQ(factors.back(), 8.0f);   // long ones slow down by the factor
  for (size_t i = 1; i < factors.size(); ++i) {
    EXPECT_GE(factors[i], factors[i - 1]) << i;
  }
  std::string sink;
  StringWritableFile out(&sink);
  o.arch = "qwen2";
  EXPECT_THAT(GenerateLlamaModel(o, &out).status().ToString(),
              HasSubstr("--rope-freqs is for --arch llama"));
  o.arch = "llama";
  o.rope_freqs = false;
  o.sliding_window = 64;
  EXPECT_THAT(GenerateLlamaModel(o, &out).status().ToString(),
              HasSubstr("--sliding-window is for gemma2"));
  o.sliding_window = 0;
  o.arch = "mamba";
  Status s = GenerateLlamaModel(o, &out).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.ToString(), HasSubstr("'mamba'"));
}

TEST(GenModelTest, WritesAFileAtomically) {
  const std::string path = ::testing::TempDir() + "/gen_model_test.gguf";
  auto r = GenerateLlamaModelFile(Env::Default(), Options(), path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), r->file_bytes);
  EXPECT_EQ(r->num_tensors, 2u + 2 * 9 + 1);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  uint64_t params = 0;
  for (const GgufTensorInfo& t : (*f)->tensors()) params += t.num_elements;
  EXPECT_EQ(r->num_parameters, params);
  std::filesystem::remove(path);
}

TEST(GenModelTest, EveryQuantizedType) {
  for (GgmlType type :
       {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
        GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
        GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    GenModelOptions o = Options(type);
    o.n_embd = 256;
    o.n_ff = 512;
    auto f =
        GgufFile::FromBuffer(std::make_shared<const std::string>(Generate(o)));
    ASSERT_TRUE(f.ok()) << GgmlTypeName(type) << ": " << f.status();
    EXPECT_EQ(f->get()->FindTensor("blk.1.ffn_down.weight")->type, type);
    EXPECT_EQ(f->get()->FindTensor("output.weight")->type, type);
    EXPECT_EQ(*f->get()->GetUint("general.quantization_version"), 2u);
  }
}

TEST(GenModelTest, MixGetsLlamaQuantizeTypes) {
  GenModelOptions o = Options();
  o.n_embd = 256;
  o.n_ff = 512;
  o.mix = QuantFileType::kQ4_K_M;
  auto f =
      GgufFile::FromBuffer(std::make_shared<const std::string>(Generate(o)));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->get()->GetUint("general.file_type"), 15u);
  EXPECT_EQ(f->get()->FindTensor("output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(f->get()->FindTensor("blk.0.attn_q.weight")->type, GgmlType::kQ4_K);
  // use_more_bits(i, 2): i < 0 || i >= 1 || ...: layer 1 gets q6_K.
  EXPECT_EQ(f->get()->FindTensor("blk.0.attn_v.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(f->get()->FindTensor("blk.1.attn_v.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(f->get()->FindTensor("blk.1.attn_norm.weight")->type,
            GgmlType::kF32);
  // n_embd 64: the k types fall back as llama-quantize's do.
  o.n_embd = 64;
  o.n_ff = 96;
  auto small =
      GgufFile::FromBuffer(std::make_shared<const std::string>(Generate(o)));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->get()->FindTensor("blk.0.attn_q.weight")->type,
            GgmlType::kQ5_0);
  EXPECT_EQ(small->get()->FindTensor("output.weight")->type, GgmlType::kQ8_0);
}

}  // namespace
}  // namespace kvault
