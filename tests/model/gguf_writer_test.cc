#include "model/gguf_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/memory_file.h"
#include "model/gguf_file.h"

namespace kvault {
namespace {

using ::testing::HasSubstr;

StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromBuffer(std::make_shared<const std::string>(bytes));
}

template <typename T>
T Load(const std::string& s, size_t offset) {
  T v;
  std::memcpy(&v, s.data() + offset, sizeof(T));
  return v;
}

std::vector<GgufMetadataEntry> EveryValueType() {
  std::string raw_bools("\x01\x00\x01", 3);
  std::string raw_i16;
  for (int16_t v : {int16_t{-32768}, int16_t{7}}) {
    raw_i16.append(reinterpret_cast<const char*>(&v), 2);
  }
  return {
      {"u8", GgufValue::Uint8(255)},
      {"i8", GgufValue::Int8(-128)},
      {"u16", GgufValue::Uint16(65535)},
      {"i16", GgufValue::Int16(-2)},
      {"u32", GgufValue::Uint32(4000000000u)},
      {"i32", GgufValue::Int32(std::numeric_limits<int32_t>::min())},
      {"u64", GgufValue::Uint64(~uint64_t{0})},
      {"i64", GgufValue::Int64(std::numeric_limits<int64_t>::min())},
      {"f32", GgufValue::Float32(-1.5f)},
      {"f64", GgufValue::Float64(1e300)},
      // A signalling NaN keeps its exact bits (no float conversions).
      {"f32_snan", GgufValue::ScalarFromBytes(
                       GgufType::kFloat32, std::string("\x01\x00\x80\x7f", 4))},
      {"bool", GgufValue::Bool(true)},
      {"string", GgufValue::String(std::string("a\0b\xff", 4))},
      {"empty_string", GgufValue::String("")},
      {"strings", GgufValue::StringArray({"", "x", std::string(300, 'y')})},
      {"floats", GgufValue::Float32Array(std::vector<float>{1, -2, 0.25f})},
      {"i32s", GgufValue::Int32Array(std::vector<int32_t>{-1, 0, 1})},
      {"u32s", GgufValue::Uint32Array(std::vector<uint32_t>{7})},
      {"i64s", GgufValue::Int64Array(std::vector<int64_t>{-5, 5})},
      {"bools", GgufValue::RawArray(GgufType::kBool, raw_bools)},
      {"i16s", GgufValue::RawArray(GgufType::kInt16, raw_i16)},
      {"f64s", GgufValue::RawArray(GgufType::kFloat64, std::string(16, '\0'))},
      {"empty_array", GgufValue::RawArray(GgufType::kUint8, "")},
      {"nested", GgufValue::ArrayOfArrays(
                     {GgufValue::StringArray({"a"}),
                      GgufValue::Int32Array(std::vector<int32_t>{1, 2, 3}),
                      GgufValue::Int32Array(std::vector<int32_t>{})})},
  };
}

TEST(GgufWriterTest, RoundTripsEveryValueType) {
  const std::vector<GgufMetadataEntry> md = EveryValueType();
  auto image = BuildGgufImage(md, {}, {});
  ASSERT_TRUE(image.ok()) << image.status();
  auto f = Parse(*image);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->metadata().size(), md.size());
  for (size_t i = 0; i < md.size(); ++i) {
    EXPECT_EQ((*f)->metadata()[i].key, md[i].key);
    EXPECT_TRUE((*f)->metadata()[i].value == md[i].value)
        << md[i].key << ": " << (*f)->metadata()[i].value.DebugString()
        << " vs " << md[i].value.DebugString();
  }
  EXPECT_EQ(*(*f)->GetInt("i8"), -128);
  EXPECT_EQ(*(*f)->GetUint("u64"), ~uint64_t{0});
  EXPECT_EQ(*(*f)->GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*(*f)->GetFloat("f32"), -1.5);
  EXPECT_EQ(*(*f)->GetFloat("f64"), 1e300);
  EXPECT_EQ(*(*f)->GetString("string"), std::string("a\0b\xff", 4));
  EXPECT_EQ((*f)->Find("f32_snan")->scalar_bits(), 0x7F800001u);
  EXPECT_EQ(*(*f)->GetIntArray("i16s"), (std::vector<int64_t>{-32768, 7}));
  EXPECT_EQ((*f)->Find("bools")->Element(1).AsBool().value(), false);
  EXPECT_EQ((*f)->Find("nested")->nested()[2].array_size(), 0u);
  EXPECT_EQ((*f)->Find("nested")->Element(1).AsIntArray().value(),
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(GgufWriterTest, LayoutMatchesTheSpec) {
  std::vector<GgufTensorInfo> tensors(2);
  tensors[0].name = "w";
  tensors[0].type = GgmlType::kF32;
  tensors[0].shape = {3, 2};  // 24 bytes, then 8 bytes of padding
  tensors[1].name = "q";
  tensors[1].type = GgmlType::kQ8_0;
  tensors[1].shape = {32};
  auto image =
      BuildGgufImage({{"k", GgufValue::Uint32(9)}}, tensors,
                     {std::string(24, '\x11'), std::string(34, '\x22')});
  ASSERT_TRUE(image.ok()) << image.status();
  const std::string& s = *image;
  EXPECT_EQ(s.substr(0, 4), "GGUF");
  EXPECT_EQ(Load<uint32_t>(s, 4), 3u);   // version
  EXPECT_EQ(Load<uint64_t>(s, 8), 2u);   // tensor count
  EXPECT_EQ(Load<uint64_t>(s, 16), 1u);  // metadata count
  EXPECT_EQ(Load<uint64_t>(s, 24), 1u);  // key length
  EXPECT_EQ(s[32], 'k');
  EXPECT_EQ(Load<uint32_t>(s, 33), 4u);  // uint32 type id
  EXPECT_EQ(Load<uint32_t>(s, 37), 9u);
  // Tensor info "w": name, n_dims 2, ne 3 and 2, type 0, offset 0.
  EXPECT_EQ(Load<uint64_t>(s, 41), 1u);
  EXPECT_EQ(Load<uint32_t>(s, 50), 2u);
  EXPECT_EQ(Load<uint64_t>(s, 54), 3u);
  EXPECT_EQ(Load<uint64_t>(s, 62), 2u);
  EXPECT_EQ(Load<uint32_t>(s, 70), 0u);
  EXPECT_EQ(Load<uint64_t>(s, 74), 0u);
  auto f = Parse(s);
  ASSERT_TRUE(f.ok()) << f.status();
  const uint64_t data = (*f)->data_offset();
  EXPECT_EQ(data % 32, 0u);
  EXPECT_EQ((*f)->FindTensor("q")->offset, 32u);  // 24 rounded up to 32
  EXPECT_EQ(s.substr(data, 24), std::string(24, '\x11'));
  EXPECT_EQ(s.substr(data + 24, 8), std::string(8, '\0'));  // padding
  EXPECT_EQ(s.substr(data + 32, 34), std::string(34, '\x22'));
  EXPECT_EQ(s.size(), data + 32 + 64);  // the last tensor is padded too
}

TEST(GgufWriterTest, ChunkedTensorDataEqualsOneWrite) {
  std::string one, chunked;
  for (bool chunks : {false, true}) {
    std::string* out = chunks ? &chunked : &one;
    StringWritableFile file(out);
    GgufWriter w(&file);
    ASSERT_TRUE(w.AddTensorInfo("t", GgmlType::kF16, {100}).ok());
    ASSERT_TRUE(w.WriteHeader().ok());
    const std::string data(200, '\x05');
    auto bytes = std::as_bytes(std::span(data));
    if (chunks) {
      ASSERT_TRUE(w.AppendTensorData(bytes.subspan(0, 7)).ok());
      ASSERT_TRUE(w.Finish().code() == StatusCode::kFailedPrecondition);
      ASSERT_TRUE(w.AppendTensorData(bytes.subspan(7)).ok());
    } else {
      ASSERT_TRUE(w.WriteTensorData(bytes).ok());
    }
    ASSERT_TRUE(w.Finish().ok());
  }
  EXPECT_EQ(one, chunked);
}

TEST(GgufWriterTest, RejectsMisuse) {
  std::string out;
  StringWritableFile file(&out);
  GgufWriter w(&file);
  ASSERT_TRUE(w.AddMetadata("a", GgufValue::Uint8(1)).ok());
  EXPECT_THAT(w.AddMetadata("a", GgufValue::Uint8(2)).ToString(),
              HasSubstr("duplicate GGUF metadata key 'a'"));
  EXPECT_EQ(w.AddMetadata("", GgufValue::Uint8(2)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_THAT(
      w.AddMetadata("general.alignment", GgufValue::Uint32(64)).ToString(),
      HasSubstr("general.alignment must be the uint32 32"));
  EXPECT_TRUE(w.AddMetadata("general.alignment", GgufValue::Uint32(32)).ok());
  EXPECT_THAT(w.AddMetadata("deep", GgufValue::ArrayOfArrays(
                                        {GgufValue::ArrayOfArrays({})}))
                  .ToString(),
              HasSubstr("nested deeper than 2"));
  EXPECT_THAT(w.AddMetadata("long", GgufValue::String(std::string(
                                        kGgufMaxStringBytes + 1, 'x')))
                  .ToString(),
              HasSubstr("over the GGUF string limit"));
  EXPECT_THAT(w.AddTensorInfo("t", GgmlType::kQ8_0, {48}).ToString(),
              HasSubstr("not a multiple of the q8_0 block size 32"));
  EXPECT_EQ(w.AddTensorInfo("t", GgmlType::kF32, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensorInfo("t", GgmlType::kF32, {1, 2, 3, 4, 5}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensorInfo("t", GgmlType::kF32, {4, 0}).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(w.AddTensorInfo("t", GgmlType::kF32, {4}).ok());
  EXPECT_THAT(w.AddTensorInfo("t", GgmlType::kF32, {4}).ToString(),
              HasSubstr("duplicate GGUF tensor name 't'"));
  const std::string data(16, '\0');
  EXPECT_EQ(w.WriteTensorData(std::as_bytes(std::span(data))).code(),
            StatusCode::kFailedPrecondition);  // before the header
  ASSERT_TRUE(w.WriteHeader().ok());
  EXPECT_EQ(w.WriteHeader().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.AddMetadata("b", GgufValue::Uint8(1)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      w.WriteTensorData(std::as_bytes(std::span(data)).subspan(1)).ToString(),
      HasSubstr("tensor 't' needs 16 bytes, got 15"));
  EXPECT_EQ(w.Finish().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(w.WriteTensorData(std::as_bytes(std::span(data))).ok());
  EXPECT_EQ(w.WriteTensorData(std::as_bytes(std::span(data))).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(w.Finish().ok());
  EXPECT_TRUE(Parse(out).ok());
}

}  // namespace
}  // namespace kvault
