// Loading the per-architecture features of ArchSpec on small edited
// models: Llama 3.1's rope_freqs, phi3's fused tensors, and the precise
// refusals (a mixture-of-experts file under a dense-only name, LongRoPE
// factors, frequency factors where the architecture has none). The
// numerics are checked against llama.cpp by arch_golden_test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/gelu.h"
#include "model/inference.h"
#include "model/rope.h"
#include "model_edit.h"

namespace kvault {
namespace {

// The generated model's RoPE pairs: head size 16, all rotated.
constexpr uint64_t kHalfRot = 8;

// An edit appending F32 tensor `name` holding `values`.
Edit AddTensor(const std::string& name, std::vector<float> values) {
  return [name, values](auto*, auto* tensors, auto* data) {
    GgufTensorInfo info;
    info.name = name;
    info.type = GgmlType::kF32;
    info.shape = {values.size()};
    tensors->push_back(info);
    data->emplace_back(reinterpret_cast<const char*>(values.data()),
                       values.size() * sizeof(float));
  };
}

// Applies every edit in order.
Edit Both(Edit a, Edit b) {
  return [a, b](auto* metadata, auto* tensors, auto* data) {
    a(metadata, tensors, data);
    b(metadata, tensors, data);
  };
}

void ExpectError(const StatusOr<std::unique_ptr<LlamaModel>>& model,
                 StatusCode code, const std::string& text) {
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), code) << model.status().ToString();
  EXPECT_NE(model.status().ToString().find(text), std::string::npos)
      << model.status().ToString();
}

TEST(ArchModelTest, LlamaLoadsRopeFreqs) {
  std::vector<float> factors(kHalfRot, 1.0f);
  factors[kHalfRot - 1] = 8.0f;
  auto model = EditedModel(AddTensor("rope_freqs.weight", factors));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->weights().rope_freqs, factors);
  auto plain = EditedModel([](auto*, auto*, auto*) {});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->weights().rope_freqs.empty());
}

TEST(ArchModelTest, RopeFreqsOfWrongSizeOrValueAreInvalid) {
  ExpectError(EditedModel(AddTensor("rope_freqs.weight",
                                    std::vector<float>(kHalfRot + 1, 1.0f))),
              StatusCode::kInvalidArgument, "rope_freqs.weight");
  std::vector<float> factors(kHalfRot, 1.0f);
  factors[3] = 0.0f;  // would divide an angle by zero
  ExpectError(EditedModel(AddTensor("rope_freqs.weight", factors)),
              StatusCode::kInvalidArgument, "element 3");
}

TEST(ArchModelTest, RopeFreqsWhereTheArchitectureHasNoneAreRefused) {
  // qwen3 has no rope_freqs in llama.cpp; ignoring one would drift.
  ExpectError(EditedModel(Both(Rename("qwen3"),
                               AddTensor("rope_freqs.weight",
                                         std::vector<float>(kHalfRot, 1.0f)))),
              StatusCode::kUnimplemented, "architecture 'qwen3'");
}

TEST(ArchModelTest, LongRopeFactorsAreRefused) {
  ExpectError(EditedModel(AddTensor("rope_factors_long.weight",
                                    std::vector<float>(kHalfRot, 1.0f))),
              StatusCode::kUnimplemented, "rope_factors_long.weight");
}

TEST(ArchModelTest, MixtureOfExpertsUnderADenseNameIsRefused) {
  // qwen3 is dense in llama.cpp (its MoE form is qwen3moe).
  auto model = EditedModel(Both(
      [](auto* metadata, auto*, auto*) {
        metadata->push_back({"llama.expert_count", GgufValue::Uint32(8)});
        metadata->push_back({"llama.expert_used_count", GgufValue::Uint32(2)});
      },
      Rename("qwen3")));
  ExpectError(model, StatusCode::kUnimplemented,
              "'qwen3' with a mixture-of-experts FFN (qwen3.expert_count = 8)");
}

// Turns the generated model into phi3: Q, K, V concatenated into
// attn_qkv, gate and up into ffn_up (gate rows first).
Edit ToPhi3(uint64_t qkv_rows = 64 + 32 + 32) {
  return Both(Rename("phi3"), [qkv_rows](auto*, auto* tensors, auto* data) {
    auto fuse = [&](const std::vector<std::string>& parts,
                    const std::string& name, uint64_t rows) {
      std::string bytes;
      for (const std::string& part : parts) {
        const size_t i = IndexOf(*tensors, part);
        bytes += (*data)[i];
        tensors->erase(tensors->begin() + i);
        data->erase(data->begin() + i);
      }
      GgufTensorInfo info;
      info.name = name;
      info.type = GgmlType::kF32;
      info.shape = {64, rows};
      bytes.resize(64 * rows * sizeof(float));
      tensors->push_back(info);
      data->push_back(bytes);
    };
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = "blk." + std::to_string(layer) + ".";
      fuse({p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"},
           p + "attn_qkv.weight", qkv_rows);
      fuse({p + "ffn_gate.weight", p + "ffn_up.weight"}, p + "ffn_up.weight",
           2 * 96);
    }
  });
}

// The `rows` x 64 F32 matrix `m` as bytes.
std::string Bytes(const kernels::MatrixView& m) {
  return std::string(reinterpret_cast<const char*>(m.data),
                     m.rows * m.row_bytes);
}

TEST(ArchModelTest, Phi3SplitsItsFusedTensorsByRows) {
  auto llama = EditedModel([](auto*, auto*, auto*) {});
  auto phi3 = EditedModel(ToPhi3());
  ASSERT_TRUE(llama.ok());
  ASSERT_TRUE(phi3.ok()) << phi3.status().ToString();
  EXPECT_EQ((*phi3)->arch().rope_style, RopeStyle::kNeox);
  EXPECT_TRUE((*phi3)->arch().scale_q);
  for (int layer = 0; layer < 2; ++layer) {
    const LayerWeights& a = (*llama)->weights().layers[layer];
    const LayerWeights& b = (*phi3)->weights().layers[layer];
    EXPECT_EQ(b.wq.rows, 64);
    EXPECT_EQ(b.wk.rows, 32);
    EXPECT_EQ(b.w_gate.rows, 96);
    EXPECT_EQ(Bytes(b.wq), Bytes(a.wq));
    EXPECT_EQ(Bytes(b.wk), Bytes(a.wk));
    EXPECT_EQ(Bytes(b.wv), Bytes(a.wv));
    EXPECT_EQ(Bytes(b.w_gate), Bytes(a.w_gate));
    EXPECT_EQ(Bytes(b.w_up), Bytes(a.w_up));
  }
}

TEST(ArchModelTest, Phi3FusedTensorOfWrongSizeIsInvalid) {
  ExpectError(EditedModel(ToPhi3(64 + 32)), StatusCode::kInvalidArgument,
              "blk.0.attn_qkv.weight");
}

TEST(ArchModelTest, Phi3NeedsItsOutputMatrix) {
  ExpectError(EditedModel(Both(ToPhi3(),
                               [](auto*, auto* tensors, auto* data) {
                                 const size_t i =
                                     IndexOf(*tensors, "output.weight");
                                 tensors->erase(tensors->begin() + i);
                                 data->erase(data->begin() + i);
                               })),
              StatusCode::kNotFound, "output.weight");
}

// Turns the generated model into gemma2, with its post-norms unless
// `post_norms` is false, and `metadata` extra keys.
Edit ToGemma2(bool post_norms, std::vector<GgufMetadataEntry> extra = {}) {
  Edit edit = Rename("gemma2");
  if (post_norms) {
    for (int layer = 0; layer < 2; ++layer) {
      const std::string p = "blk." + std::to_string(layer) + ".";
      edit = Both(edit, AddTensor(p + "post_attention_norm.weight",
                                  std::vector<float>(64, 1.0f)));
      edit = Both(edit, AddTensor(p + "post_ffw_norm.weight",
                                  std::vector<float>(64, 1.0f)));
    }
  }
  return Both(edit, [extra](auto* metadata, auto*, auto*) {
    for (const auto& entry : extra) metadata->push_back(entry);
  });
}

TEST(ArchModelTest, Gemma2NeedsItsPostNorms) {
  ExpectError(EditedModel(ToGemma2(false)), StatusCode::kNotFound,
              "blk.0.post_attention_norm.weight");
}

TEST(ArchModelTest, Gemma2ReadsWindowAndSoftCapsWithLlamaCppDefaults) {
  auto defaults = EditedModel(ToGemma2(true));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ((*defaults)->hparams().n_swa, 4096u);
  EXPECT_EQ((*defaults)->hparams().attn_softcap, 50.0f);
  EXPECT_EQ((*defaults)->hparams().final_softcap, 30.0f);
  EXPECT_EQ((*defaults)->arch().swa_pattern, 2u);
  auto set = EditedModel(ToGemma2(
      true, {{"gemma2.attention.sliding_window", GgufValue::Uint32(24)},
             {"gemma2.attn_logit_softcapping", GgufValue::Float32(20.0f)},
             {"gemma2.final_logit_softcapping", GgufValue::Float32(25.0f)}}));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)->hparams().n_swa, 24u);
  EXPECT_EQ((*set)->hparams().attn_softcap, 20.0f);
  EXPECT_EQ((*set)->hparams().final_softcap, 25.0f);
  ExpectError(EditedModel(ToGemma2(true, {{"gemma2.final_logit_softcapping",
                                           GgufValue::Float32(0.0f)}})),
              StatusCode::kInvalidArgument, "soft-capping");
  ExpectError(EditedModel(ToGemma2(true, {{"gemma2.attention.sliding_window",
                                           GgufValue::Uint32(0)}})),
              StatusCode::kInvalidArgument, "sliding_window");
}

// gemma3 = gemma2's layout plus per-head q/k norms, with `extra` keys.
Edit ToGemma3(std::vector<GgufMetadataEntry> extra) {
  Edit edit = Both(ToGemma2(true, std::move(extra)), Rename("gemma3"));
  edit = Both(edit, [](auto* metadata, auto*, auto*) {
    for (auto& entry : *metadata) {
      if (entry.key.rfind("gemma2.", 0) == 0) {
        entry.key = "gemma3." + entry.key.substr(7);
      }
      if (entry.key == "general.architecture") {
        entry.value = GgufValue::String("gemma3");
      }
    }
  });
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    edit = Both(edit, AddTensor(p + "attn_q_norm.weight",
                                std::vector<float>(16, 1.0f)));
    edit = Both(edit, AddTensor(p + "attn_k_norm.weight",
                                std::vector<float>(16, 1.0f)));
  }
  return edit;
}

TEST(ArchModelTest, Gemma3ReadsItsWindowPattern) {
  const GgufMetadataEntry window{"gemma2.attention.sliding_window",
                                 GgufValue::Uint32(16)};
  auto defaults = EditedModel(ToGemma3({window}));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ((*defaults)->hparams().swa_pattern, 6u);
  EXPECT_EQ((*defaults)->hparams().n_swa, 16u);
  auto two = EditedModel(ToGemma3(
      {window,
       {"gemma2.attention.sliding_window_pattern", GgufValue::Uint32(2)}}));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ((*two)->hparams().swa_pattern, 2u);
  ExpectError(EditedModel(ToGemma3({window,
                                    {"gemma2.attention.sliding_window_pattern",
                                     GgufValue::Uint32(0)}})),
              StatusCode::kInvalidArgument, "sliding_window_pattern");
  ExpectError(EditedModel(ToGemma3({})), StatusCode::kUnimplemented,
              "gemma3.attention.sliding_window");
}

// ggml's GELU: the fp16 table within fp16 rounding of the exact tanh
// form, 0 at or below -10, the identity at or above 10.
TEST(ArchModelTest, GeluFollowsGgmlsTable) {
  for (float x :
       {-9.5f, -3.0f, -0.7f, -0.01f, 0.0f, 0.02f, 0.5f, 1.0f, 2.5f, 9.9f}) {
    const double exact =
        0.5 * x *
        (1 + std::tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x)));
    EXPECT_NEAR(GeluFp16Table(x), exact, 2e-3 * (std::fabs(exact) + 1e-3))
        << "x " << x;
  }
  EXPECT_EQ(GeluFp16Table(-10.0f), 0.0f);
  EXPECT_EQ(GeluFp16Table(10.0f), 10.0f);
  EXPECT_EQ(GeluFp16Table(123.0f), 123.0f);
  const float gate[] = {-11.0f, 0.5f, 12.0f}, up[] = {2.0f, 3.0f, 0.5f};
  float out[3];
  GeGlu(gate, up, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], GeluFp16Table(0.5f) * 3.0f);
  EXPECT_EQ(out[2], 6.0f);
}

// Doubling a position doubles each pair's angle exactly (float times 2),
// and a factor of 2 halves it exactly: the same rotation, bit for bit.
TEST(ArchModelTest, RopeFactorsDivideTheAngle) {
  const std::vector<float> twos(kHalfRot, 2.0f);
  const std::vector<float> ones(kHalfRot, 1.0f);
  const Pos pos[] = {3, 17, 250};
  const Pos doubled[] = {6, 34, 500};
  const RopeTable plain(pos, 2 * kHalfRot, 10000.0f, 1.0f);
  const RopeTable unit(pos, 2 * kHalfRot, 10000.0f, 1.0f, ones);
  const RopeTable halved(doubled, 2 * kHalfRot, 10000.0f, 1.0f, twos);
  const RopeTable unhalved(doubled, 2 * kHalfRot, 10000.0f, 1.0f);
  for (uint64_t t = 0; t < 3; ++t) {
    std::vector<float> x(2 * kHalfRot);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * i - 1.0f;
    std::vector<float> a = x, b = x, c = x, d = x;
    plain.Apply(RopeStyle::kNeox, t, a.data(), 1, 2 * kHalfRot);
    unit.Apply(RopeStyle::kNeox, t, b.data(), 1, 2 * kHalfRot);
    halved.Apply(RopeStyle::kNeox, t, c.data(), 1, 2 * kHalfRot);
    unhalved.Apply(RopeStyle::kNeox, t, d.data(), 1, 2 * kHalfRot);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4));
    EXPECT_NE(a, d);  // the factors did something
  }
}

// Returns layer 0's K row of each of sequence 0's cells [first, end) in
// `cache` (layer 0's key depends on the token and its position only).
std::vector<std::vector<float>> LayerZeroKeys(const KvCache& cache,
                                              size_t first, size_t end) {
  std::vector<std::vector<float>> keys;
  const KvStorage& storage = *cache.storage();
  for (size_t i = first; i < end; ++i) {
    std::vector<float> row(storage.layout().k_row_elems());
    storage.Read(KvSide::kK, 0, cache.table().CellAt(SeqId(0), i), row);
    keys.push_back(std::move(row));
  }
  return keys;
}

// Returns an F32 cache of 128 cells for `model`.
std::unique_ptr<KvCache> F32Cache(const LlamaModel& model) {
  KvCacheOptions options;
  options.num_pages = 8;
  options.page_size = 16;
  options.layout = model.KvLayoutFor(KvDtype::kF32);
  return std::move(KvCache::Create(options).value());
}

// A context shift rotates the moved keys with the model's frequency
// factors: each equals the key its token gets decoded fresh at the new
// position (to float rounding of the two rotations).
TEST(ArchModelTest, ContextShiftRotatesWithTheFrequencyFactors) {
  std::vector<float> factors(kHalfRot);
  for (uint64_t i = 0; i < kHalfRot; ++i) factors[i] = 1.0f + 3.0f * i;
  auto model = EditedModel(AddTensor("rope_freqs.weight", factors));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<BatchToken> prompt;
  for (int i = 0; i < 40; ++i) {
    prompt.push_back({SeqId(0), (i * 7 + 5) % 200, i, false});
  }
  auto cache = F32Cache(**model);
  InferenceContext ctx(model->get(), cache.get());
  ASSERT_TRUE(ctx.Decode(prompt).ok());
  ASSERT_TRUE(ctx.DiscardRange(SeqId(0), 4, 20).ok());
  const auto shifted = LayerZeroKeys(*cache, 4, 24);
  // Tokens 20..39 decoded fresh at positions 4..23.
  std::vector<BatchToken> fresh(prompt.begin() + 20, prompt.end());
  for (size_t i = 0; i < fresh.size(); ++i) fresh[i].pos = 4 + i;
  auto fresh_cache = F32Cache(**model);
  InferenceContext fresh_ctx(model->get(), fresh_cache.get());
  ASSERT_TRUE(fresh_ctx.Decode(fresh).ok());
  const auto want = LayerZeroKeys(*fresh_cache, 0, fresh.size());
  ASSERT_EQ(shifted.size(), want.size());
  for (size_t c = 0; c < want.size(); ++c) {
    for (size_t e = 0; e < want[c].size(); ++e) {
      EXPECT_NEAR(shifted[c][e], want[c][e],
                  1e-4f * (1 + std::fabs(want[c][e])))
          << "cell " << c << " value " << e;
    }
  }
}

}  // namespace
}  // namespace kvault
