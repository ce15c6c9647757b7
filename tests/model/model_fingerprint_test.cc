#include "model/model_fingerprint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/env.h"
#include "core/memory_file.h"
#include "model/gen_model.h"
#include "model/gguf_writer.h"

namespace kvault {
namespace {

std::string Generate(const GenModelOptions& options) {
  std::string image;
  StringWritableFile out(&image);
  auto r = GenerateLlamaModel(options, &out);
  EXPECT_TRUE(r.ok()) << r.status();
  return image;
}

GenModelOptions SmallModel() {
  GenModelOptions o;
  o.n_embd = 64;
  o.n_layer = 1;
  o.n_head = 4;
  o.n_ff = 128;
  o.seed = 5;
  return o;  // token_embd is 64 x 259 f32 = 17 blocks of 4 KiB: sampled
}

std::unique_ptr<GgufFile> ParseOrDie(const std::string& image) {
  auto f = GgufFile::FromBuffer(std::make_shared<const std::string>(image));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(f).value() : nullptr;
}

ModelFingerprint Fp(const std::string& image,
                    const FingerprintOptions& options = {}) {
  return ComputeModelFingerprint(*ParseOrDie(image), options);
}

// Returns `image` with byte `offset` of tensor `name`'s data flipped.
std::string FlipTensorByte(const std::string& image, const std::string& name,
                           uint64_t offset) {
  auto f = ParseOrDie(image);
  const GgufTensorInfo* t = f->FindTensor(name);
  EXPECT_NE(t, nullptr);
  EXPECT_LT(offset, t->size_bytes);
  std::string out = image;
  out[f->data_offset() + t->offset + offset] ^= 0x01;
  return out;
}

// Rewrites `image` after `edit` changed its metadata and tensor lists.
std::string Rebuild(
    const std::string& image,
    const std::function<void(std::vector<GgufMetadataEntry>*,
                             std::vector<GgufTensorInfo>*)>& edit) {
  auto f = ParseOrDie(image);
  std::vector<GgufMetadataEntry> md = f->metadata();
  std::vector<GgufTensorInfo> tensors = f->tensors();
  edit(&md, &tensors);
  std::vector<std::string> data;
  for (const GgufTensorInfo& t : tensors) {
    auto bytes = *f->TensorData(t.name);
    data.emplace_back(reinterpret_cast<const char*>(bytes.data()),
                      bytes.size());
  }
  auto out = BuildGgufImage(md, tensors, data);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

TEST(ModelFingerprintTest, SampleRanges) {
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(FingerprintSampleRanges(0), Ranges{});
  EXPECT_EQ(FingerprintSampleRanges(100), (Ranges{{0, 100}}));
  EXPECT_EQ(FingerprintSampleRanges(16 * 4096), (Ranges{{0, 16 * 4096}}));
  // 17 blocks, at most 16 read: stride 2 -> blocks 0, 2, ..., 14 and 16.
  const Ranges r = FingerprintSampleRanges(16 * 4096 + 10);
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(r.front(), (std::pair<uint64_t, uint64_t>{0, 4096}));
  EXPECT_EQ(r.back(),
            (std::pair<uint64_t, uint64_t>{16 * 4096, 16 * 4096 + 10}));
  for (uint64_t size :
       {uint64_t{1} << 20, uint64_t{1} << 33, uint64_t{123456789}}) {
    const Ranges big = FingerprintSampleRanges(size);
    EXPECT_LE(big.size(), 16u) << size;
    EXPECT_EQ(big.front().first, 0u);
    EXPECT_EQ(big.back().second, size);
    for (size_t i = 1; i < big.size(); ++i) {
      EXPECT_LE(big[i - 1].second, big[i].first) << size;
    }
  }
}

TEST(ModelFingerprintTest, DeterministicAndSameFromDisk) {
  const std::string image = Generate(SmallModel());
  const ModelFingerprint fp = Fp(image);
  EXPECT_EQ(fp, Fp(image));
  EXPECT_EQ(fp.ToHex().size(), 32u);
  EXPECT_NE(fp, ModelFingerprint{});
  const std::string path = ::testing::TempDir() + "/fp_model.gguf";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), image, path, false).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ComputeModelFingerprint(**file), fp);
  (void)Env::Default()->RemoveFile(path);
}

TEST(ModelFingerprintTest, ChangesWithSampledWeightBytes) {
  const std::string image = Generate(SmallModel());
  const ModelFingerprint fp = Fp(image);
  // Small tensors are hashed whole; large ones in their sampled blocks.
  EXPECT_NE(Fp(FlipTensorByte(image, "blk.0.attn_norm.weight", 100)), fp);
  EXPECT_NE(Fp(FlipTensorByte(image, "blk.0.ffn_down.weight", 32767)), fp);
  EXPECT_NE(Fp(FlipTensorByte(image, "token_embd.weight", 0)), fp);
  EXPECT_NE(Fp(FlipTensorByte(image, "token_embd.weight", 2 * 4096 + 7)), fp);
  EXPECT_NE(Fp(FlipTensorByte(image, "token_embd.weight", 64 * 259 * 4 - 1)),
            fp);
}

TEST(ModelFingerprintTest, UnsampledBlocksAreTheDocumentedLimit) {
  const std::string image = Generate(SmallModel());
  const std::string edited = FlipTensorByte(image, "token_embd.weight", 4096);
  EXPECT_EQ(Fp(edited), Fp(image));  // block 1 of 17 is skipped
  FingerprintOptions all;
  all.max_blocks_per_tensor = 1000;
  EXPECT_NE(Fp(edited, all), Fp(image, all));
}

TEST(ModelFingerprintTest, ChangesWithHyperparametersAndSeed) {
  const GenModelOptions base = SmallModel();
  const ModelFingerprint fp = Fp(Generate(base));
  GenModelOptions o = base;
  o.rope_freq_base = 20000.0f;
  EXPECT_NE(Fp(Generate(o)), fp);
  o = base;
  o.n_ctx = 4096;
  EXPECT_NE(Fp(Generate(o)), fp);
  o = base;
  o.seed = 6;
  EXPECT_NE(Fp(Generate(o)), fp);
}

TEST(ModelFingerprintTest, ChangesWithTokenizerEntries) {
  const std::string image = Generate(SmallModel());
  const ModelFingerprint fp = Fp(image);
  auto edit_tokens = [&](int which) {
    return Rebuild(image, [&](std::vector<GgufMetadataEntry>* md,
                              std::vector<GgufTensorInfo>*) {
      for (GgufMetadataEntry& e : *md) {
        if (which == 0 && e.key == "tokenizer.ggml.tokens") {
          std::vector<std::string> tokens = *e.value.AsStringArray();
          tokens[200] = "<0xZZ>";
          e.value = GgufValue::StringArray(tokens);
        }
        if (which == 1 && e.key == "tokenizer.ggml.scores") {
          std::vector<float> scores = *e.value.AsFloatArray();
          scores[3] = -1.0f;
          e.value = GgufValue::Float32Array(scores);
        }
        if (which == 2 && e.key == "tokenizer.ggml.bos_token_id") {
          e.value = GgufValue::Uint32(2);
        }
      }
    });
  };
  for (int which = 0; which < 3; ++which) {
    EXPECT_NE(Fp(edit_tokens(which)), fp) << which;
  }
}

TEST(ModelFingerprintTest, LayoutDoesNotCount) {
  const std::string image = Generate(SmallModel());
  const std::string reordered =
      Rebuild(image, [](std::vector<GgufMetadataEntry>* md,
                        std::vector<GgufTensorInfo>* tensors) {
        std::reverse(md->begin(), md->end());
        std::reverse(tensors->begin(), tensors->end());
      });
  ASSERT_NE(reordered, image);
  EXPECT_EQ(Fp(reordered), Fp(image));
}

TEST(ModelFingerprintTest, SharedModelsDiffer) {
  const std::string dir = std::string(KVAULT_SOURCE_DIR) + "/../shared/models";
  std::vector<ModelFingerprint> fps;
  for (const char* name : {"stories260K.gguf", "stories260K.f16.gguf",
                           "stories260K.q8_0.gguf", "tiny-random-f32.gguf"}) {
    const std::string path = dir + "/" + name;
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "shared test file " << path << " is missing";
    }
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    fps.push_back(ComputeModelFingerprint(**f));
    EXPECT_EQ(fps.back(), ComputeModelFingerprint(**f)) << name;
  }
  for (size_t i = 0; i < fps.size(); ++i) {
    for (size_t j = i + 1; j < fps.size(); ++j) EXPECT_NE(fps[i], fps[j]);
  }
}

}  // namespace
}  // namespace kvault
