#include "model/llama_hparams.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "model/gguf_writer.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

const std::string kModels =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models";

// The keys a minimal llama model needs; tests add, replace or drop some.
std::vector<GgufMetadataEntry> BaseMetadata() {
  return {
      {"general.architecture", GgufValue::String("llama")},
      {"llama.embedding_length", GgufValue::Uint32(64)},
      {"llama.block_count", GgufValue::Uint32(2)},
      {"llama.context_length", GgufValue::Uint32(256)},
      {"llama.attention.head_count", GgufValue::Uint32(4)},
      {"llama.feed_forward_length", GgufValue::Uint32(128)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::Float32(1e-6f)},
      {"llama.vocab_size", GgufValue::Uint32(100)},
  };
}

void Set(std::vector<GgufMetadataEntry>* md, const std::string& key,
         GgufValue value) {
  for (GgufMetadataEntry& e : *md) {
    if (e.key == key) {
      e.value = std::move(value);
      return;
    }
  }
  md->push_back({key, std::move(value)});
}

void Drop(std::vector<GgufMetadataEntry>* md, const std::string& key) {
  std::erase_if(*md, [&](const GgufMetadataEntry& e) { return e.key == key; });
}

StatusOr<LlamaHparams> Read(const std::vector<GgufMetadataEntry>& md) {
  auto image = BuildGgufImage(md, {}, {});
  if (!image.ok()) return image.status();
  auto file = GgufFile::FromBuffer(
      std::make_shared<const std::string>(std::move(image).value()));
  if (!file.ok()) return file.status();
  return ReadLlamaHparams(**file);
}

TEST(LlamaHparamsTest, Stories260K) {
  const std::string path = kModels + "/stories260K.gguf";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "shared test file " << path << " is missing";
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto h = ReadLlamaHparams(**file);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->architecture, "llama");
  EXPECT_EQ(h->n_layer, 5u);
  EXPECT_EQ(h->n_embd, 64u);
  EXPECT_EQ(h->n_head, 8u);
  EXPECT_EQ(h->n_head_kv, 4u);
  EXPECT_EQ(h->n_gqa(), 2u);
  EXPECT_EQ(h->n_ff, 172u);
  EXPECT_EQ(h->n_ctx_train, 2048u);
  EXPECT_EQ(h->n_vocab, 512u);
  EXPECT_EQ(h->n_embd_head_k, 8u);
  EXPECT_EQ(h->n_embd_k_gqa(), 32u);
  EXPECT_EQ(h->n_rot, 8u);
  EXPECT_FLOAT_EQ(h->rms_norm_eps, 1e-5f);
  // This file has no rope.freq_base: llama.cpp's default applies.
  EXPECT_FALSE((*file)->Has("llama.rope.freq_base"));
  EXPECT_EQ(h->rope_freq_base, 10000.0f);
  EXPECT_EQ(h->rope_scaling_type, RopeScalingType::kLinear);
  EXPECT_EQ(h->rope_freq_scale(), 1.0f);
  EXPECT_EQ(h->rope_scaling_orig_ctx, 2048u);
}

TEST(LlamaHparamsTest, OtherSharedModels) {
  struct Want {
    const char* file;
    uint32_t n_layer, n_head, n_head_kv, n_ff, n_ctx, n_vocab, n_rot;
  };
  // The f16 / q8_0 conversions record context_length 512, the f32 file
  // 2048 (as the files say).
  const Want wants[] = {
      {"stories260K.f16.gguf", 5, 8, 4, 172, 512, 512, 8},
      {"stories260K.q8_0.gguf", 5, 8, 4, 172, 512, 512, 8},
      {"tiny-random-f32.gguf", 2, 4, 2, 128, 2048, 32000, 16},
  };
  for (const Want& w : wants) {
    const std::string path = kModels + "/" + w.file;
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "shared test file " << path << " is missing";
    }
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto h = ReadLlamaHparams(**file);
    ASSERT_TRUE(h.ok()) << w.file << ": " << h.status();
    EXPECT_EQ(h->n_embd, 64u) << w.file;
    EXPECT_EQ(h->n_layer, w.n_layer) << w.file;
    EXPECT_EQ(h->n_head, w.n_head) << w.file;
    EXPECT_EQ(h->n_head_kv, w.n_head_kv) << w.file;
    EXPECT_EQ(h->n_ff, w.n_ff) << w.file;
    EXPECT_EQ(h->n_ctx_train, w.n_ctx) << w.file;
    EXPECT_EQ(h->n_vocab, w.n_vocab) << w.file;
    EXPECT_EQ(h->n_rot, w.n_rot) << w.file;
  }
}

TEST(LlamaHparamsTest, DefaultsForAbsentOptionalKeys) {
  auto h = Read(BaseMetadata());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->n_head_kv, 4u);       // = n_head
  EXPECT_EQ(h->n_embd_head_k, 16u);  // n_embd / n_head
  EXPECT_EQ(h->n_embd_head_v, 16u);
  EXPECT_EQ(h->n_rot, 16u);  // = n_embd_head_k
  EXPECT_EQ(h->rope_freq_base, 10000.0f);
  EXPECT_EQ(h->rope_scaling_type, RopeScalingType::kLinear);
  EXPECT_EQ(h->rope_scaling_factor, 0.0f);
  EXPECT_EQ(h->rope_freq_scale(), 1.0f);
  EXPECT_EQ(h->rope_scaling_orig_ctx, 256u);  // = context_length
  EXPECT_EQ(h->n_vocab, 100u);                // llama.vocab_size
  EXPECT_FLOAT_EQ(h->rms_norm_eps, 1e-6f);
}

TEST(LlamaHparamsTest, ExplicitKeysWin) {
  auto md = BaseMetadata();
  Set(&md, "llama.attention.head_count_kv", GgufValue::Uint32(2));
  Set(&md, "llama.rope.dimension_count", GgufValue::Uint32(8));
  Set(&md, "llama.rope.freq_base", GgufValue::Float32(500000.0f));
  Set(&md, "llama.rope.scaling.type", GgufValue::String("yarn"));
  Set(&md, "llama.rope.scaling.factor", GgufValue::Float32(4.0f));
  Set(&md, "llama.rope.scaling.original_context_length", GgufValue::Uint32(64));
  Set(&md, "tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b"}));
  auto h = Read(md);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->n_head_kv, 2u);
  EXPECT_EQ(h->n_rot, 8u);
  EXPECT_EQ(h->rope_freq_base, 500000.0f);
  EXPECT_EQ(h->rope_scaling_type, RopeScalingType::kYarn);
  EXPECT_EQ(h->rope_freq_scale(), 0.25f);
  EXPECT_EQ(h->rope_scaling_orig_ctx, 64u);
  EXPECT_EQ(h->n_vocab, 2u);  // the token list wins over vocab_size
  // The old key for the linear factor is honoured when the new is absent.
  Drop(&md, "llama.rope.scaling.factor");
  Set(&md, "llama.rope.scale_linear", GgufValue::Float32(2.0f));
  EXPECT_EQ(Read(md)->rope_freq_scale(), 0.5f);
}

TEST(LlamaHparamsTest, PerLayerArrays) {
  auto md = BaseMetadata();
  Set(&md, "llama.attention.head_count",
      GgufValue::Int32Array(std::vector<int32_t>{4, 4}));
  Set(&md, "llama.feed_forward_length",
      GgufValue::Uint32Array(std::vector<uint32_t>{128, 128}));
  auto h = Read(md);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->n_head, 4u);
  EXPECT_EQ(h->n_ff, 128u);
  Set(&md, "llama.feed_forward_length",
      GgufValue::Uint32Array(std::vector<uint32_t>{128, 256}));
  EXPECT_EQ(Read(md).status().code(), StatusCode::kUnimplemented);
  Set(&md, "llama.feed_forward_length",
      GgufValue::Uint32Array(std::vector<uint32_t>{128}));
  EXPECT_THAT(Read(md).status().ToString(),
              HasSubstr("1 per-layer values, expected 2"));
}

TEST(LlamaHparamsTest, MissingRequiredKeys) {
  for (const char* key :
       {"general.architecture", "llama.embedding_length", "llama.block_count",
        "llama.context_length", "llama.attention.head_count",
        "llama.feed_forward_length",
        "llama.attention.layer_norm_rms_epsilon"}) {
    auto md = BaseMetadata();
    Drop(&md, key);
    Status s = Read(md).status();
    EXPECT_TRUE(s.IsNotFound()) << key << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(key));
  }
  auto md = BaseMetadata();
  Drop(&md, "llama.vocab_size");
  EXPECT_THAT(Read(md).status().ToString(), HasSubstr("no vocabulary size"));
}

TEST(LlamaHparamsTest, ValidationErrors) {
  struct Case {
    const char* key;
    GgufValue value;
    const char* message;
  };
  const Case cases[] = {
      {"llama.block_count", GgufValue::String("5"),
       "llama.block_count': expected an integer, got string"},
      {"llama.block_count", GgufValue::Uint32(0), "n_layer must be > 0"},
      {"llama.block_count", GgufValue::Uint32(513), "over the limit 512"},
      {"llama.attention.head_count", GgufValue::Uint32(0), "must be > 0"},
      {"llama.attention.head_count", GgufValue::Uint32(5),
       "is not a multiple of llama.attention.head_count = 5"},
      {"llama.attention.head_count_kv", GgufValue::Uint32(3),
       "n_head 4 is not a multiple of n_head_kv 3"},
      {"llama.rope.dimension_count", GgufValue::Uint32(7), "n_rot 7"},
      {"llama.rope.dimension_count", GgufValue::Uint32(32), "n_rot 32"},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::Float32(0.0f),
       "rms_norm_eps"},
      {"llama.rope.freq_base", GgufValue::Float32(-1.0f), "rope_freq_base"},
      {"llama.rope.scaling.type", GgufValue::String("ntk"), "'ntk'"},
      {"llama.context_length", GgufValue::Int32(-1), "non-negative"},
      {"llama.vocab_size", GgufValue::Uint32(0), "vocabulary size 0"},
  };
  for (const Case& c : cases) {
    auto md = BaseMetadata();
    Set(&md, c.key, c.value);
    Status s = Read(md).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.key << ": " << s;
    EXPECT_THAT(s.ToString(), HasSubstr(c.message)) << c.key;
  }
}

TEST(LlamaHparamsTest, TokenEmbeddingShapeMustMatch) {
  std::vector<GgufTensorInfo> tensors(1);
  tensors[0].name = "token_embd.weight";
  tensors[0].shape = {64, 99};
  auto image =
      BuildGgufImage(BaseMetadata(), tensors, {std::string(64 * 99 * 4, '\0')});
  ASSERT_TRUE(image.ok());
  auto file = GgufFile::FromBuffer(std::make_shared<const std::string>(*image));
  ASSERT_TRUE(file.ok());
  EXPECT_THAT(ReadLlamaHparams(**file).status().ToString(),
              HasSubstr("token_embd.weight has shape [64, 99], expected "
                        "[n_embd 64, n_vocab 100]"));
}

}  // namespace
}  // namespace kvault
