// `kvault quantize` end to end: the real binary converts a gen-model file,
// and the result loads (GgufFile) with the expected type mix.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "model/gguf_file.h"
#include "server_process.h"

namespace kvault::e2e {
namespace {

class QuantizeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests as parallel processes, and
    // a shared in.gguf was read by one while another rewrote it.
    dir_ = ::testing::TempDir() + "/quantize_e2e_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    in_ = dir_ + "/in.gguf";
    CommandRun gen = Kvault(
        "gen-model --n-embd 256 --n-layer 4 --n-head 4 "
        "--n-head-kv 1 --n-ff 512 --type f16 -o " +
        in_);
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
  }
  std::string dir_;
  std::string in_;
};

TEST_F(QuantizeE2eTest, Q4_K_MLoadsWithTheExpectedTypes) {
  const std::string out = dir_ + "/q4_k_m.gguf";
  CommandRun r = Kvault("quantize " + in_ + " " + out + " q4_k_m --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(Q4_K_M): 39 tensors, 30 converted"),
            std::string::npos)
      << r.output;
  auto f = GgufFile::Open(out);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*(*f)->GetUint("general.file_type"), 15u);
  EXPECT_EQ((*f)->FindTensor("output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ((*f)->FindTensor("token_embd.weight")->type, GgmlType::kQ4_K);
  // use_more_bits over 4 layers: attn_v and ffn_down of layer 3
  // (>= 7n/8 = 3) and layer 2 ((2 - n/8) % 3 == 2) get q6_K.
  for (int l = 0; l < 4; ++l) {
    const GgmlType want = l < 2 ? GgmlType::kQ4_K : GgmlType::kQ6_K;
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ((*f)->FindTensor(p + "attn_v.weight")->type, want) << l;
    EXPECT_EQ((*f)->FindTensor(p + "ffn_down.weight")->type, want) << l;
    EXPECT_EQ((*f)->FindTensor(p + "attn_q.weight")->type, GgmlType::kQ4_K);
    EXPECT_EQ((*f)->FindTensor(p + "ffn_norm.weight")->type, GgmlType::kF32);
  }
  CommandRun inspect = Kvault("inspect " + out);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("types:         q4_K 25 tensors"),
            std::string::npos)
      << inspect.output;
  EXPECT_NE(inspect.output.find("file type:     Q4_K_M (15)"),
            std::string::npos);
}

TEST_F(QuantizeE2eTest, PureAndExplicitTypes) {
  const std::string out = dir_ + "/pure.gguf";
  CommandRun r = Kvault("quantize " + in_ + " " + out +
                        " IQ4_XS --pure --output-tensor-type q8_0"
                        " --token-embedding-type f16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto f = GgufFile::Open(out);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->FindTensor("output.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ((*f)->FindTensor("token_embd.weight")->type, GgmlType::kF16);
  EXPECT_EQ((*f)->FindTensor("blk.3.ffn_down.weight")->type, GgmlType::kIQ4_XS);
}

TEST_F(QuantizeE2eTest, Errors) {
  CommandRun bad_type =
      Kvault("quantize " + in_ + " " + dir_ + "/x.gguf q4_k_x");
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_NE(bad_type.output.find("unknown quantization type 'q4_k_x'"),
            std::string::npos)
      << bad_type.output;
  const std::string q8 = dir_ + "/q8.gguf";
  ASSERT_EQ(Kvault("quantize " + in_ + " " + q8 + " q8_0").exit_code, 0);
  CommandRun requant = Kvault("quantize " + q8 + " " + dir_ + "/y.gguf q4_0");
  EXPECT_EQ(requant.exit_code, 1);
  // (kvault writes llama-quantize's order: output.weight first.)
  EXPECT_NE(requant.output.find("tensor output.weight is q8_0"),
            std::string::npos)
      << requant.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/y.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/y.gguf.tmp"));
  CommandRun rows = Kvault("quantize " + in_ + " " + dir_ +
                           "/z.gguf q8_0"
                           " --output-tensor-type q4_K --threads 1");
  EXPECT_EQ(rows.exit_code, 0) << rows.output;  // 256 divides the rows
  CommandRun missing =
      Kvault("quantize " + dir_ + "/none.gguf " + dir_ + "/w.gguf q4_0");
  EXPECT_EQ(missing.exit_code, 1);
}

}  // namespace
}  // namespace kvault::e2e
