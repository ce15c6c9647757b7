#include "model/model_quantizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "core/memory_file.h"
#include "model/gen_model.h"
#include "model/gguf_file.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

const std::string kDir =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models/kquant/st260K-x4.";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

StatusOr<std::string> Quantize(const GgufFile& in, const char* mix,
                               int threads = 2) {
  ModelQuantizeOptions o;
  KV_ASSIGN_OR_RETURN(o.plan.ftype, ParseQuantFileType(mix));
  o.threads = threads;
  std::string out;
  StringWritableFile file(&out);
  KV_RETURN_IF_ERROR(QuantizeModel(in, o, &file).status());
  return out;
}

// Quantizing st260K-x4.f32.gguf gives the shared file of each type byte for
// byte: tensor types, tensor data, order, metadata and padding.
TEST(ModelQuantizerTest, ReproducesSharedFilesByteForByte) {
  const std::string f32_path = kDir + "f32.gguf";
  if (!std::filesystem::exists(f32_path))
    GTEST_SKIP() << "missing " << f32_path;
  auto f32 = GgufFile::Open(f32_path);
  ASSERT_TRUE(f32.ok()) << f32.status();
  for (const char* mix :
       {"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_k_s", "q3_k_m",
        "q2_k", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs"}) {
    StatusOr<std::string> got = Quantize(**f32, mix);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string want = ReadAll(kDir + mix + ".gguf");
    EXPECT_EQ(got->size(), want.size()) << mix;
    EXPECT_TRUE(*got == want) << mix << " differs from the shared file";
  }
}

// ../shared/models/arch's q8_0 mixture-of-experts files are llama-quantize's
// output for their f32 files (3-D expert tensors, f32 router): kvault
// writes them byte for byte.
TEST(ModelQuantizerTest, ReproducesSharedMixtureOfExpertsFiles) {
  const std::string dir =
      std::string(KVAULT_SOURCE_DIR) + "/../shared/models/arch/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing " << dir;
  for (const char* model : {"mixtral", "qwen3moe"}) {
    auto f32 = GgufFile::Open(dir + model + ".f32.gguf");
    ASSERT_TRUE(f32.ok()) << f32.status();
    StatusOr<std::string> got = Quantize(**f32, "q8_0");
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string want = ReadAll(dir + model + ".q8_0.gguf");
    EXPECT_EQ(got->size(), want.size()) << model;
    EXPECT_TRUE(*got == want) << model << " differs from the shared file";
  }
}

std::shared_ptr<const std::string> SmallModel(GgmlType type, uint32_t e) {
  GenModelOptions o;
  o.n_embd = e;
  o.n_ff = 2 * e;
  o.n_layer = 2;
  o.type = type;
  auto bytes = std::make_shared<std::string>();
  StringWritableFile out(bytes.get());
  EXPECT_TRUE(GenerateLlamaModel(o, &out).ok());
  return bytes;
}

TEST(ModelQuantizerTest, WritesTypesAndMetadataAndIsThreadIndependent) {
  auto in = GgufFile::FromBuffer(SmallModel(GgmlType::kF16, 256));
  ASSERT_TRUE(in.ok());
  StatusOr<std::string> one = Quantize(**in, "Q4_K_M", 1);
  StatusOr<std::string> four = Quantize(**in, "Q4_K_M", 4);
  ASSERT_TRUE(one.ok() && four.ok()) << one.status() << four.status();
  EXPECT_TRUE(*one == *four);
  auto out = GgufFile::FromBuffer(std::make_shared<const std::string>(*one));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*(*out)->GetUint("general.file_type"), 15u);
  EXPECT_EQ(*(*out)->GetUint("general.quantization_version"), 2u);
  EXPECT_EQ((*out)->metadata().back().key, "general.file_type");
  EXPECT_EQ((*out)->FindTensor("output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ((*out)->FindTensor("blk.0.attn_q.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ((*out)->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ((*out)->tensors().front().name, "output.weight");
}

TEST(ModelQuantizerTest, ProgressCoversEveryTensor) {
  auto in = GgufFile::FromBuffer(SmallModel(GgmlType::kF32, 64));
  ASSERT_TRUE(in.ok());
  ModelQuantizeOptions o;
  o.plan.ftype = QuantFileType::kQ8_0;
  size_t calls = 0;
  uint64_t last_done = 0;
  o.progress = [&](const QuantizeProgress& p) {
    ++calls;
    EXPECT_EQ(p.index, calls);
    last_done = p.input_bytes_done;
    EXPECT_LE(p.input_bytes_done, p.input_bytes_total);
  };
  std::string sink;
  StringWritableFile file(&sink);
  auto r = QuantizeModel(**in, o, &file);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, (*in)->tensors().size());
  EXPECT_EQ(last_done, r->input_tensor_bytes);
}

TEST(ModelQuantizerTest, PreciseErrors) {
  // A quantized input tensor that must be converted.
  auto q8 = GgufFile::FromBuffer(SmallModel(GgmlType::kQ8_0, 256));
  ASSERT_TRUE(q8.ok());
  auto s = Quantize(**q8, "Q4_K_M").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.ToString(), HasSubstr("is q8_0; kvault quantize converts f32"));
  // An explicit output type whose block does not divide the rows.
  auto f32 = GgufFile::FromBuffer(SmallModel(GgmlType::kF32, 64));
  ASSERT_TRUE(f32.ok());
  ModelQuantizeOptions o;
  o.plan.ftype = QuantFileType::kQ8_0;
  o.plan.output_tensor_type = GgmlType::kQ4_K;
  std::string sink;
  StringWritableFile file(&sink);
  s = QuantizeModel(**f32, o, &file).status();
  EXPECT_THAT(s.ToString(), HasSubstr("tensor output.weight has rows of 64 "
                                      "values, not a multiple of type q4_K"));
}

TEST(ModelQuantizerTest, FileIsWrittenDurably) {
  const std::string dir = ::testing::TempDir() + "/model_quantizer_test";
  std::filesystem::create_directories(dir);
  const std::string in_path = dir + "/in.gguf";
  GenModelOptions g;
  ASSERT_TRUE(GenerateLlamaModelFile(Env::Default(), g, in_path).ok());
  ModelQuantizeOptions o;
  o.plan.ftype = QuantFileType::kQ5_0;
  auto r = QuantizeModelFile(Env::Default(), in_path, dir + "/out.gguf", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.gguf.tmp"));
  EXPECT_EQ(std::filesystem::file_size(dir + "/out.gguf"), r->file_bytes);
  auto bad = QuantizeModelFile(Env::Default(), dir + "/missing.gguf",
                               dir + "/out2.gguf", o);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/out2.gguf.tmp"));
}

}  // namespace
}  // namespace kvault
