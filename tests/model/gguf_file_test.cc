// GgufFile: real files from ../shared, accessors, and hostile input (every
// malformation the reader must name, truncation at every header offset,
// seeded random byte flips).
#include "model/gguf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "model/gguf_writer.h"
#include "model/llama_hparams.h"
#include "model/model_fingerprint.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

const std::string kModels =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models";

#define SKIP_IF_MISSING(path)                                       \
  if (!std::filesystem::exists(path)) {                             \
    GTEST_SKIP() << "shared test file " << (path) << " is missing"; \
  }

// Little-endian GGUF bytes built by hand, for malformed files.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Raw(std::string(1, static_cast<char>(v))); }
  Bytes& U32(uint32_t v) { return Le(v); }
  Bytes& U64(uint64_t v) { return Le(v); }
  Bytes& Str(std::string_view s) {
    U64(s.size());
    return Raw(s);
  }
  Bytes& Raw(std::string_view s) {
    s_.append(s);
    return *this;
  }
  Bytes& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return Raw("GGUF").U32(version).U64(n_tensors).U64(n_kv);
  }
  Bytes& KvU32(std::string_view key, uint32_t v) {
    return Str(key).U32(static_cast<uint32_t>(GgufType::kUint32)).U32(v);
  }
  Bytes& Tensor(std::string_view name, std::vector<uint64_t> shape,
                uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(shape.size()));
    for (uint64_t ne : shape) U64(ne);
    return U32(type).U64(offset);
  }
  Bytes& PadTo(size_t alignment) {
    while (s_.size() % alignment != 0) s_.push_back('\0');
    return *this;
  }
  Bytes& Zeros(size_t n) { return Raw(std::string(n, '\0')); }
  size_t size() const { return s_.size(); }
  const std::string& str() const { return s_; }

 private:
  template <typename T>
  Bytes& Le(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s_.append(b, sizeof(T));
    return *this;
  }
  std::string s_;
};

StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromBuffer(std::make_shared<const std::string>(bytes));
}

Status ParseStatus(const std::string& bytes) { return Parse(bytes).status(); }

// A small valid file with values of several types and three tensors; the
// last tensor ends on an alignment boundary, so every strict prefix of the
// file is invalid.
std::string ValidImage() {
  std::vector<GgufMetadataEntry> md = {
      {"general.architecture", GgufValue::String("llama")},
      {"general.name", GgufValue::String("test")},
      {"llama.block_count", GgufValue::Uint32(1)},
      {"llama.embedding_length", GgufValue::Uint32(32)},
      {"llama.context_length", GgufValue::Uint64(128)},
      {"llama.attention.head_count", GgufValue::Int32(4)},
      {"llama.feed_forward_length", GgufValue::Uint16(64)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::Float32(1e-5f)},
      {"llama.rope.freq_base", GgufValue::Float64(10000.0)},
      {"tokenizer.ggml.add_bos_token", GgufValue::Bool(true)},
      {"tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b", "c"})},
      {"tokenizer.ggml.scores",
       GgufValue::Float32Array(std::vector<float>{0.5f, -1.0f, 2.0f})},
      {"nested", GgufValue::ArrayOfArrays(
                     {GgufValue::Int32Array(std::vector<int32_t>{1, 2}),
                      GgufValue::StringArray({"x"})})},
  };
  std::vector<GgufTensorInfo> tensors(3);
  tensors[0].name = "token_embd.weight";
  tensors[0].type = GgmlType::kF32;
  tensors[0].shape = {32, 3};
  tensors[1].name = "blk.0.attn_q.weight";
  tensors[1].type = GgmlType::kQ8_0;
  tensors[1].shape = {32, 32};
  tensors[2].name = "output_norm.weight";
  tensors[2].type = GgmlType::kF16;
  tensors[2].shape = {32};
  std::vector<std::string> data;
  uint8_t fill = 1;
  for (size_t size : {32 * 3 * 4, 32 * 34, 32 * 2}) {
    std::string d(size, '\0');
    for (char& c : d) c = static_cast<char>(fill++ % 7);  // finite halves
    data.push_back(d);
  }
  return *BuildGgufImage(md, tensors, data);
}

TEST(GgufFileTest, ReadsStories260K) {
  const std::string path = kModels + "/stories260K.gguf";
  SKIP_IF_MISSING(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 2048);
  EXPECT_FLOAT_EQ(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5);
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ((*f.GetStringArray("tokenizer.ggml.tokens"))[1], "<s>");
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ((*f.GetIntArray("tokenizer.ggml.token_type"))[0], 2);  // unknown
  ASSERT_EQ(f.tensors().size(), 48u);
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    EXPECT_EQ(f.TensorData(t).size(), t.num_elements * 4) << t.name;
  }
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f.FindTensor("blk.4.ffn_down.weight")->shape,
            (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(f.FindTensor("blk.5.ffn_down.weight"), nullptr);
  auto data = f.TensorData("output_norm.weight");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->size(), 64u * 4);
  EXPECT_TRUE(f.TensorData("nope").status().IsNotFound());
}

std::map<GgmlType, int> CountTypes(const GgufFile& f) {
  std::map<GgmlType, int> counts;
  for (const GgufTensorInfo& t : f.tensors()) ++counts[t.type];
  return counts;
}

TEST(GgufFileTest, ReadsStories260KF16AndQ8_0) {
  const std::string f16 = kModels + "/stories260K.f16.gguf";
  const std::string q8 = kModels + "/stories260K.q8_0.gguf";
  SKIP_IF_MISSING(f16);
  SKIP_IF_MISSING(q8);
  auto a = GgufFile::Open(f16);
  ASSERT_TRUE(a.ok()) << a.status();
  // 2-D weights in f16, the 11 norm vectors stay f32.
  EXPECT_EQ(CountTypes(**a), (std::map<GgmlType, int>{{GgmlType::kF32, 11},
                                                      {GgmlType::kF16, 37}}));
  EXPECT_EQ(*(*a)->GetUint("general.file_type"), 1u);
  auto b = GgufFile::Open(q8);
  ASSERT_TRUE(b.ok()) << b.status();
  // ffn_down has ne0 = 172, not a multiple of 32, so it falls back to f16.
  EXPECT_EQ(CountTypes(**b), (std::map<GgmlType, int>{{GgmlType::kF32, 11},
                                                      {GgmlType::kF16, 5},
                                                      {GgmlType::kQ8_0, 32}}));
  EXPECT_EQ((*b)->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kF16);
  EXPECT_EQ((*b)->FindTensor("blk.0.attn_q.weight")->size_bytes,
            64u / 32 * 34 * 64);
}

TEST(GgufFileTest, ReadsVocabOnlyFiles) {
  const std::string dir = std::string(KVAULT_SOURCE_DIR) + "/../shared/vocab";
  SKIP_IF_MISSING(dir + "/ggml-vocab-gpt-2.gguf");
  for (const char* name : {"gpt-2", "llama-spm", "phi-3", "starcoder"}) {
    auto f = GgufFile::Open(dir + "/ggml-vocab-" + name + ".gguf");
    ASSERT_TRUE(f.ok()) << name << ": " << f.status();
    EXPECT_TRUE((*f)->tensors().empty());
    EXPECT_TRUE((*f)->Has("tokenizer.ggml.model")) << name;
  }
}

TEST(GgufFileTest, AccessorErrorsNameKeyAndTypes) {
  auto f = Parse(ValidImage());
  ASSERT_TRUE(f.ok()) << f.status();
  Status missing = (*f)->GetUint("llama.nope").status();
  EXPECT_TRUE(missing.IsNotFound());
  EXPECT_THAT(std::string(missing.message()), HasSubstr("llama.nope"));
  Status wrong = (*f)->GetString("llama.block_count").status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("llama.block_count"));
  EXPECT_THAT(std::string(wrong.message()),
              HasSubstr("expected string, got uint32"));
  EXPECT_THAT((*f)->GetFloat("general.name").status().ToString(),
              HasSubstr("expected float32 or float64, got string"));
  EXPECT_THAT((*f)->GetStringArray("tokenizer.ggml.scores").status().ToString(),
              HasSubstr("got array of float32"));
  EXPECT_EQ(*(*f)->GetUint("llama.feed_forward_length"), 64u);  // uint16
  EXPECT_EQ(*(*f)->GetInt("llama.attention.head_count"), 4);    // int32
  EXPECT_DOUBLE_EQ(*(*f)->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_TRUE(*(*f)->GetBool("tokenizer.ggml.add_bos_token"));
  const GgufValue* nested = (*f)->Find("nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array_size(), 2u);
  EXPECT_EQ(*nested->nested()[0].AsIntArray(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*nested->nested()[1].AsStringArray(),
            (std::vector<std::string>{"x"}));
}

TEST(GgufFileTest, IntegerRangeChecks) {
  std::vector<GgufMetadataEntry> md = {
      {"neg", GgufValue::Int8(-1)},
      {"big", GgufValue::Uint64(~uint64_t{0})},
  };
  auto f = Parse(*BuildGgufImage(md, {}, {}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*(*f)->GetInt("neg"), -1);
  EXPECT_THAT((*f)->GetUint("neg").status().ToString(),
              HasSubstr("non-negative"));
  EXPECT_EQ(*(*f)->GetUint("big"), ~uint64_t{0});
  EXPECT_THAT((*f)->GetInt("big").status().ToString(), HasSubstr("int64"));
}

TEST(GgufFileTest, OpenMissingFileIsNotFound) {
  auto f = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_TRUE(f.status().IsNotFound()) << f.status();
  EXPECT_THAT(f.status().ToString(), HasSubstr("/nonexistent/model.gguf"));
}

TEST(GgufFileTest, ReadsVersion2AndCustomAlignment) {
  std::vector<GgufTensorInfo> tensors(2);
  tensors[0].name = "a";
  tensors[0].shape = {3};
  tensors[1].name = "b";
  tensors[1].shape = {5};
  GgufWriterOptions options;
  options.version = 2;
  options.alignment = 64;
  auto image =
      BuildGgufImage({{"general.alignment", GgufValue::Uint32(64)}}, tensors,
                     {std::string(12, 'a'), std::string(20, 'b')}, options);
  ASSERT_TRUE(image.ok()) << image.status();
  auto f = Parse(*image);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 64u);
  auto b = (*f)->TensorData("b");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b->data()), b->size()),
            std::string(20, 'b'));
}

// Expects a Corruption (or `code`) whose message contains every `parts`.
void ExpectError(const std::string& bytes, std::vector<std::string> parts,
                 StatusCode code = StatusCode::kCorruption) {
  Status s = ParseStatus(bytes);
  ASSERT_FALSE(s.ok()) << "parsed OK, expected: " << parts[0];
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& p : parts) {
    EXPECT_THAT(std::string(s.message()), HasSubstr(p));
  }
}

constexpr uint32_t kU32 = static_cast<uint32_t>(GgufType::kUint32);
constexpr uint32_t kArr = static_cast<uint32_t>(GgufType::kArray);
constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8 = 8;

TEST(GgufFileHostileTest, HeaderErrors) {
  ExpectError("", {"magic at offset 0 needs 4 bytes, 0 left"});
  ExpectError(Bytes().Raw("GGUX").U32(3).U64(0).U64(0).str(),
              {"not a GGUF file", "offset 0", "0x58554747"});
  ExpectError(Bytes().Header(0, 0, 1).str(), {"GGUF version 1 at offset 4"},
              StatusCode::kUnimplemented);
  ExpectError(Bytes().Header(0, 0, 0x03000000).str(), {"big-endian"},
              StatusCode::kUnimplemented);
  ExpectError(Bytes().Raw("GGUF").U32(3).str(),
              {"tensor count at offset 8 needs 8 bytes, 0 left"});
  ExpectError(Bytes().Header(uint64_t{1} << 60, 0).str(),
              {"1152921504606846976 tensors", "cannot fit"});
  ExpectError(Bytes().Header(0, ~uint64_t{0}).Zeros(64).str(), {"cannot fit"});
}

TEST(GgufFileHostileTest, MetadataErrors) {
  // Key length over the string limit, then past the end of the file.
  ExpectError(Bytes().Header(0, 1).U64(uint64_t{1} << 40).Zeros(16).str(),
              {"metadata key at offset 24", "over the limit of 1048576"});
  ExpectError(Bytes().Header(0, 1).U64(100).Raw("abc").Zeros(10).str(),
              {"metadata key at offset 32 needs 100 bytes"});
  ExpectError(Bytes().Header(0, 1).Str("k").U32(13).U32(0).str(),
              {"metadata entry 0 at offset 24", "metadata key 'k'",
               "invalid value type 13 at offset 33"});
  ExpectError(Bytes().Header(0, 1).Str("b").U32(7).U8(2).Zeros(8).str(),
              {"bool value 2 (not 0 or 1) at offset 37"});
  ExpectError(Bytes()
                  .Header(0, 1)
                  .Str("a")
                  .U32(kArr)
                  .U32(kU32)
                  .U64((uint64_t{1} << 26) + 1)
                  .Zeros(16)
                  .str(),
              {"array at offset 37", "over the limit of 67108864"});
  ExpectError(Bytes()
                  .Header(0, 1)
                  .Str("a")
                  .U32(kArr)
                  .U32(kU32)
                  .U64(1000)
                  .Zeros(16)
                  .str(),
              {"array data at offset 49 needs 4000 bytes, 16 left"});
  ExpectError(Bytes()
                  .Header(0, 1)
                  .Str("a")
                  .U32(kArr)
                  .U32(kArr)
                  .U64(1)
                  .U32(kArr)
                  .U64(1)
                  .U32(kU32)
                  .U64(0)
                  .str(),
              {"array at offset 49", "deeper than 2"});
  ExpectError(Bytes()
                  .Header(0, 1)
                  .Str("a")
                  .U32(kArr)
                  .U32(kArr)
                  .U64(1)
                  .U32(99)
                  .U64(0)
                  .str(),
              {"invalid array element type 99 at offset 49"});
  ExpectError(
      Bytes().Header(0, 2).KvU32("dup", 1).KvU32("dup", 2).str(),
      {"duplicate metadata key 'dup' at offset 43 (first at offset 24)"});
  ExpectError(Bytes().Header(0, 1).KvU32("general.alignment", 48).str(),
              {"general.alignment (key at offset 24) is 48", "power of two"});
  ExpectError(Bytes().Header(0, 1).KvU32("general.alignment", 0).str(),
              {"general.alignment", "is 0"});
  ExpectError(Bytes()
                  .Header(0, 1)
                  .Str("general.alignment")
                  .U32(static_cast<uint32_t>(GgufType::kString))
                  .Str("32")
                  .str(),
              {"general.alignment", "expected an integer, got string"});
}

// A file with one f32 tensor of `shape`, `type` and `offset`, followed by
// `data_bytes` bytes of data.
std::string OneTensor(std::vector<uint64_t> shape, uint32_t type,
                      uint64_t offset, size_t data_bytes) {
  return Bytes()
      .Header(1, 0)
      .Tensor("t", shape, type, offset)
      .PadTo(32)
      .Zeros(data_bytes)
      .str();
}

TEST(GgufFileHostileTest, TensorInfoErrors) {
  // The info starts at offset 24; n_dims at 33, dims from 37.
  ExpectError(OneTensor({}, kF32, 0, 32),
              {"tensor 't' (info at offset 24)", "n_dims 0 at offset 33"});
  ExpectError(OneTensor({1, 1, 1, 1, 1}, kF32, 0, 32),
              {"n_dims 5 at offset 33"});
  ExpectError(OneTensor({4, 0}, kF32, 0, 32),
              {"dimension 1 = 0 at offset 45 is zero"});
  ExpectError(OneTensor({uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0, 32),
              {"dimension 1", "overflows the element count"});
  ExpectError(OneTensor({~uint64_t{0}}, kF32, 0, 32),
              {"dimension 0", "overflows"});
  ExpectError(OneTensor({8}, 4, 0, 32),
              {"unknown ggml type id 4 at offset 45"});
  ExpectError(OneTensor({8}, 99, 0, 32), {"unknown ggml type id 99"});
  ExpectError(OneTensor({16}, kQ8, 0, 64), {"does not fit type q8_0"});
  ExpectError(
      OneTensor({8}, kF32, 8, 64),
      {"data offset 8 at offset 49 is not a multiple of the alignment 32"});
  ExpectError(OneTensor({8}, kF32, 0, 31), {"tensor 't'", "runs past the end"});
  ExpectError(OneTensor({8}, kF32, uint64_t{1} << 63, 64),
              {"runs past the end"});
  ExpectError(Bytes().Header(1, 0).Tensor("t", {8}, kF32, 0).str(),
              {"data section at offset 64 starts past the end"});
  ExpectError(Bytes()
                  .Header(2, 0)
                  .Tensor("a", {16}, kF32, 0)
                  .Tensor("b", {8}, kF32, 32)
                  .PadTo(32)
                  .Zeros(128)
                  .str(),
              {"tensor 'a' (f32 [16]: 64 bytes; info at offset 24) at [0, "
               "64) overlaps tensor 'b' (f32 [8]: 32 bytes"});
  // K-quant tensors whose bytes the file cuts short: a Q4_K tensor of 512
  // values needs 288 bytes; 200 are there, or the next tensor starts at 256.
  ExpectError(OneTensor({512}, 12, 0, 200),
              {"tensor 't' (q4_K [512]: 288 bytes; info at offset 24)",
               "runs past the end"});
  ExpectError(Bytes()
                  .Header(2, 0)
                  .Tensor("a", {512}, 12, 0)
                  .Tensor("b", {256}, 14, 256)
                  .PadTo(32)
                  .Zeros(512)
                  .str(),
              {"tensor 'a' (q4_K [512]: 288 bytes", "at [0, 288) overlaps",
               "tensor 'b' (q6_K [256]: 210 bytes"});
  ExpectError(OneTensor({200}, 12, 0, 512), {"does not fit type q4_K"});
  ExpectError(Bytes()
                  .Header(2, 0)
                  .Tensor("a", {8}, kF32, 0)
                  .Tensor("a", {8}, kF32, 32)
                  .PadTo(32)
                  .Zeros(64)
                  .str(),
              {"duplicate tensor name 'a' at offset 57 (first at offset 24)"});
  // A tensor of a known type with no kernels still parses (refused later).
  auto ok = Parse(OneTensor({256}, 16, 0, 66));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->tensors()[0].type, GgmlType::kIQ2_XXS);
}

TEST(GgufFileHostileTest, EveryTruncationFails) {
  const std::string image = ValidImage();
  auto full = Parse(image);
  ASSERT_TRUE(full.ok()) << full.status();
  const uint64_t data_offset = (*full)->data_offset();
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= data_offset; ++n) cuts.push_back(n);
  for (size_t n = data_offset + 1; n < image.size(); n += 7) cuts.push_back(n);
  cuts.push_back(image.size() - 1);
  for (size_t n : cuts) {
    Status s = ParseStatus(image.substr(0, n));
    ASSERT_FALSE(s.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << n << ": " << s;
  }
}

// Calls every accessor on a parsed file; must not crash whatever it holds.
void ExerciseEverything(const GgufFile& f) {
  for (const GgufMetadataEntry& e : f.metadata()) {
    (void)e.value.DebugString();
    (void)f.GetString(e.key);
    (void)f.GetUint(e.key);
    (void)f.GetInt(e.key);
    (void)f.GetFloat(e.key);
    (void)f.GetBool(e.key);
    (void)f.GetStringArray(e.key);
    (void)f.GetFloatArray(e.key);
    (void)f.GetIntArray(e.key);
  }
  uint64_t sum = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    for (std::byte b : f.TensorData(t)) sum += static_cast<uint8_t>(b);
  }
  (void)sum;
  (void)ReadLlamaHparams(f);
  (void)ComputeModelFingerprint(f);
}

TEST(GgufFileHostileTest, RandomByteFlipsNeverCrash) {
  const std::string image = ValidImage();
  const uint64_t seed = 20240611;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int num_ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string bad = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the header and metadata, where every byte matters.
      const size_t limit = rng() % 4 == 0 ? bad.size() : 640;
      bad[rng() % limit] ^= static_cast<char>(1 + rng() % 255);
    }
    auto f = Parse(bad);
    if (f.ok()) {
      ++num_ok;
      ExerciseEverything(**f);
    } else {
      EXPECT_FALSE(f.status().message().empty());
    }
  }
  // Flips inside string bytes or tensor data leave a valid file.
  EXPECT_GT(num_ok, 0);
  EXPECT_LT(num_ok, 4000);
}

}  // namespace
}  // namespace kvault
