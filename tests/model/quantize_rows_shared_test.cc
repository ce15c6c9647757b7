// Against llama-quantize: quantizing each tensor of st260K-x4.f32.gguf to
// the type it has in ../shared/models/kquant/st260K-x4.TYPE.gguf (made by
// llama.cpp b10573's llama-quantize, no imatrix) gives the same bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/quantize.h"

namespace kvault {
namespace {

const std::string kDir =
    std::string(KVAULT_SOURCE_DIR) + "/../shared/models/kquant/st260K-x4.";

class QuantizeRowsSharedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeRowsSharedTest, TensorBytesMatchLlamaQuantize) {
  const std::string f32_path = kDir + "f32.gguf";
  const std::string ref_path = kDir + GetParam() + ".gguf";
  if (!std::filesystem::exists(f32_path) ||
      !std::filesystem::exists(ref_path)) {
    GTEST_SKIP() << "missing " << f32_path << " or " << ref_path;
  }
  auto f32 = GgufFile::Open(f32_path);
  auto ref = GgufFile::Open(ref_path);
  ASSERT_TRUE(f32.ok() && ref.ok());
  for (const GgufTensorInfo& t : (*ref)->tensors()) {
    const GgufTensorInfo* src = (*f32)->FindTensor(t.name);
    ASSERT_NE(src, nullptr) << t.name;
    ASSERT_EQ(src->type, GgmlType::kF32);
    std::vector<float> values(src->num_elements);
    std::memcpy(values.data(), (*f32)->TensorData(*src).data(),
                values.size() * 4);
    std::vector<std::byte> bytes(t.size_bytes);
    ASSERT_TRUE(QuantizeRow(t.type, values, bytes).ok()) << t.name;
    std::span<const std::byte> want = (*ref)->TensorData(t);
    size_t first_diff = bytes.size();
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != want[i]) {
        first_diff = i;
        break;
      }
    }
    EXPECT_EQ(first_diff, bytes.size())
        << t.name << " (" << GgmlTypeName(t.type) << ") differs at byte "
        << first_diff << " of " << bytes.size();
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeRowsSharedTest,
                         ::testing::Values("f16", "bf16", "q8_0", "q6_k",
                                           "q5_k_m", "q4_k_m", "q4_k_s",
                                           "q3_k_m", "q2_k", "q4_0", "q4_1",
                                           "q5_0", "q5_1", "iq4_nl", "iq4_xs"));

}  // namespace
}  // namespace kvault
