// The shared tokenizer test vectors (llama.cpp's test-tokenizer-0 inputs and
// the Hugging Face tokenizers' outputs): every string must give exactly the
// recorded ids, tokenized without BOS and without special-token parsing, and
// must detokenize back to itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/memory_file.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/tokenizer.h"

namespace kvault {
namespace {

std::string VocabPath(const std::string& name) {
  return std::string(KVAULT_SOURCE_DIR) + "/../shared/vocab/ggml-vocab-" +
         name + ".gguf";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .inp format: each test string followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> ParseInputs(const std::string& text) {
  static const std::string kSeparator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(kSeparator, pos)) != std::string::npos;
       pos = hit + kSeparator.size()) {
    inputs.push_back(text.substr(pos, hit - pos));
  }
  return inputs;
}

// The .out format: one line of space-separated ids per test string.
std::vector<std::vector<TokenId>> ParseOutputs(const std::string& text) {
  std::vector<std::vector<TokenId>> outputs;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<TokenId>& row = outputs.emplace_back();
    for (TokenId id; ids >> id;) row.push_back(id);
  }
  return outputs;
}

// Tokenizes every string of `inp_path` with `tokenizer` and expects the ids
// of the matching line of `out_path` and a round trip; prints the count.
void ExpectRecordedTokenizations(const Tokenizer& tokenizer,
                                 const std::string& inp_path,
                                 const std::string& out_path,
                                 const std::string& label) {
  const auto inputs = ParseInputs(ReadAll(inp_path));
  const auto expected = ParseOutputs(ReadAll(out_path));
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GT(inputs.size(), 40u);
  size_t num_passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("string #" + std::to_string(i) + " '" + inputs[i] + "'");
    const std::vector<TokenId> ids =
        tokenizer.Tokenize(inputs[i], /*add_special=*/false,
                           /*parse_special=*/false);
    EXPECT_EQ(ids, expected[i]);
    EXPECT_EQ(tokenizer.Detokenize(ids), inputs[i]);
    num_passed += ids == expected[i];
  }
  std::cout << "[ vectors  ] " << label << ": " << num_passed << "/"
            << inputs.size() << " strings match\n";
}

class VocabVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorsTest, MatchesEveryRecordedTokenization) {
  const std::string path = VocabPath(GetParam());
  if (!std::filesystem::exists(path) ||
      !std::filesystem::exists(path + ".inp") ||
      !std::filesystem::exists(path + ".out")) {
    GTEST_SKIP() << "shared vocab vectors not found: " << path
                 << "{,.inp,.out} (needs ../shared next to the source tree)";
  }
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tokenizer = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ExpectRecordedTokenizations(**tokenizer, path + ".inp", path + ".out",
                              GetParam());
}

std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(SharedVocab, VocabVectorsTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2",
                                           "starcoder"),
                         ParamName);

// Pre-tokenizers without a shared vocabulary: the shared GPT-2 vocabulary
// with tokenizer.ggml.pre rewritten, against llama.cpp's llama-tokenize on
// the same rewritten file (testdata/record_pre_vectors.py).
class RewrittenPreVectorsTest : public ::testing::TestWithParam<std::string> {};

// Returns the GGUF at `path` with tokenizer.ggml.pre set to `pre`.
StatusOr<std::unique_ptr<GgufFile>> WithPre(const std::string& path,
                                            const std::string& pre) {
  KV_ASSIGN_OR_RETURN(auto source, GgufFile::Open(path));
  auto bytes = std::make_shared<std::string>();
  StringWritableFile file(bytes.get());
  GgufWriter writer(&file);
  for (const GgufMetadataEntry& entry : source->metadata()) {
    KV_RETURN_IF_ERROR(writer.AddMetadata(
        entry.key, entry.key == "tokenizer.ggml.pre" ? GgufValue::String(pre)
                                                     : entry.value));
  }
  KV_RETURN_IF_ERROR(writer.WriteHeader());
  KV_RETURN_IF_ERROR(writer.Finish());
  return GgufFile::FromBuffer(bytes);
}

TEST_P(RewrittenPreVectorsTest, MatchesLlamaCppOnTheSameVocabulary) {
  const std::string path = VocabPath("gpt-2");
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "shared vocab not found: " << path;
  }
  auto gguf = WithPre(path, GetParam());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tokenizer = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string data =
      std::string(KVAULT_SOURCE_DIR) + "/tests/model/testdata/vocab/";
  ExpectRecordedTokenizations(**tokenizer, data + "pre_vectors.inp",
                              data + "gpt-2." + GetParam() + ".out",
                              "gpt-2 as " + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Pre, RewrittenPreVectorsTest,
                         ::testing::Values("deepseek-coder", "tekken"),
                         ParamName);

// --- LoadVocab: the tokenizer.ggml.* keys, defaults and validation. ---

using ::testing::HasSubstr;
using Entries = std::vector<std::pair<std::string, GgufValue>>;

// A GGUF image with `entries` as its metadata and no tensors.
std::unique_ptr<GgufFile> MakeGguf(const Entries& entries) {
  auto bytes = std::make_shared<std::string>();
  StringWritableFile file(bytes.get());
  GgufWriter writer(&file);
  for (const auto& [key, value] : entries) {
    EXPECT_TRUE(writer.AddMetadata(key, value).ok()) << key;
  }
  EXPECT_TRUE(writer.WriteHeader().ok());
  EXPECT_TRUE(writer.Finish().ok());
  auto gguf = GgufFile::FromBuffer(bytes);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return gguf.ok() ? std::move(gguf).value() : nullptr;
}

Entries SpmEntries() {
  return {
      {"tokenizer.ggml.model", GgufValue::String("llama")},
      {"tokenizer.ggml.tokens", GgufValue::StringArray({"<unk>", "<s>", "</s>",
                                                        "\xE2\x96\x81"
                                                        "a",
                                                        "<|im_end|>"})}};
}

TEST(LoadVocabTest, SentencePieceDefaults) {
  auto gguf = MakeGguf(SpmEntries());
  ASSERT_NE(gguf, nullptr);
  auto v = LoadVocab(*gguf);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->kind, VocabKind::kSpm);
  EXPECT_EQ(v->size(), 5u);
  EXPECT_EQ(v->bos, 1);
  EXPECT_EQ(v->eos, 2);
  EXPECT_EQ(v->unk, 0);
  EXPECT_FALSE(v->pad.has_value());
  EXPECT_EQ(v->eot, 4);  // found by its text
  EXPECT_TRUE(v->add_bos);
  EXPECT_FALSE(v->add_eos);
  EXPECT_TRUE(v->add_space_prefix);
  EXPECT_EQ(v->type(3), TokenType::kNormal);
  EXPECT_EQ(v->score(3), 0.0f);
}

TEST(LoadVocabTest, KeysOverrideDefaults) {
  Entries e = SpmEntries();
  e.push_back({"tokenizer.ggml.bos_token_id", GgufValue::Uint32(3)});
  e.push_back({"tokenizer.ggml.padding_token_id", GgufValue::Uint32(0)});
  e.push_back({"tokenizer.ggml.add_bos_token", GgufValue::Bool(false)});
  e.push_back({"tokenizer.ggml.add_eos_token", GgufValue::Bool(true)});
  e.push_back({"tokenizer.ggml.add_space_prefix", GgufValue::Bool(false)});
  const float scores[] = {0, 0, 0, -1.5f, 0};
  e.push_back({"tokenizer.ggml.scores", GgufValue::Float32Array(scores)});
  const int32_t types[] = {2, 3, 3, 1, 3};
  e.push_back({"tokenizer.ggml.token_type", GgufValue::Int32Array(types)});
  auto v = LoadVocab(*MakeGguf(e));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bos, 3);
  EXPECT_EQ(v->pad, 0);
  EXPECT_FALSE(v->add_bos);
  EXPECT_TRUE(v->add_eos);
  EXPECT_FALSE(v->add_space_prefix);
  EXPECT_EQ(v->score(3), -1.5f);
  EXPECT_EQ(v->type(0), TokenType::kUnknown);
}

TEST(LoadVocabTest, ErrorsNameTheKey) {
  struct Case {
    std::string key;
    GgufValue value;
    std::string expected;  // in the message
    StatusCode code;
  };
  const float short_scores[] = {0, 0};
  const std::vector<Case> cases = {
      {"tokenizer.ggml.eos_token_id", GgufValue::Uint32(99),
       "tokenizer.ggml.eos_token_id", StatusCode::kInvalidArgument},
      {"tokenizer.ggml.scores", GgufValue::Float32Array(short_scores),
       "tokenizer.ggml.scores", StatusCode::kInvalidArgument},
      {"tokenizer.ggml.add_bos_token", GgufValue::String("yes"),
       "tokenizer.ggml.add_bos_token", StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    Entries e = SpmEntries();
    e.push_back({c.key, c.value});
    auto v = LoadVocab(*MakeGguf(e));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), c.code);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.expected));
  }
  // -1 written as uint32 means "no such token".
  Entries none = SpmEntries();
  none.push_back(
      {"tokenizer.ggml.padding_token_id", GgufValue::Uint32(0xFFFFFFFF)});
  auto no_pad = LoadVocab(*MakeGguf(none));
  ASSERT_TRUE(no_pad.ok()) << no_pad.status();
  EXPECT_FALSE(no_pad->pad.has_value());

  auto missing = LoadVocab(*MakeGguf({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("tokenizer.ggml.model"));
  auto bert = LoadVocab(
      *MakeGguf({{"tokenizer.ggml.model", GgufValue::String("bert")},
                 {"tokenizer.ggml.tokens", GgufValue::StringArray({"a"})}}));
  ASSERT_FALSE(bert.ok());
  EXPECT_EQ(bert.status().code(), StatusCode::kUnimplemented);
  auto not_array =
      LoadVocab(*MakeGguf({{"tokenizer.ggml.model", GgufValue::String("llama")},
                           {"tokenizer.ggml.tokens", GgufValue::String("a")}}));
  ASSERT_FALSE(not_array.ok());
  EXPECT_THAT(std::string(not_array.status().message()),
              HasSubstr("tokenizer.ggml.tokens"));
}

Entries BpeEntries(std::string pre, size_t num_extra) {
  std::vector<std::string> tokens = {"a", "b", "ab"};
  for (size_t i = 0; i < num_extra; ++i)
    tokens.push_back("x" + std::to_string(i));
  return {{"tokenizer.ggml.model", GgufValue::String("gpt2")},
          {"tokenizer.ggml.pre", GgufValue::String(std::move(pre))},
          {"tokenizer.ggml.tokens", GgufValue::StringArray(tokens)},
          {"tokenizer.ggml.merges", GgufValue::StringArray({"a b"})}};
}

TEST(LoadVocabTest, BytePairDefaultsDependOnThePreTokenizer) {
  auto small = LoadVocab(*MakeGguf(BpeEntries("gpt-2", 0)));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->kind, VocabKind::kBpe);
  EXPECT_FALSE(small->bos.has_value());  // default 11 is out of range
  EXPECT_FALSE(small->add_bos);
  EXPECT_FALSE(small->add_space_prefix);
  EXPECT_EQ(small->merges.size(), 1u);
  auto llama3 = LoadVocab(*MakeGguf(BpeEntries("llama-bpe", 20)));
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->bos, 11);
  EXPECT_EQ(llama3->eos, 11);
  EXPECT_TRUE(llama3->add_bos);

  auto unknown = LoadVocab(*MakeGguf(BpeEntries("martian", 0)));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("'martian'"));

  Entries no_merges = BpeEntries("gpt-2", 0);
  no_merges.pop_back();
  auto r = LoadVocab(*MakeGguf(no_merges));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("tokenizer.ggml.merges"));
}

TEST(LoadVocabTest, SharedFilesLoadWithTheirKeys) {
  const std::string spm_path = VocabPath("llama-spm");
  const std::string bpe_path = VocabPath("gpt-2");
  if (!std::filesystem::exists(spm_path) ||
      !std::filesystem::exists(bpe_path)) {
    GTEST_SKIP() << "shared vocab files not found: " << spm_path;
  }
  auto spm = LoadVocab(**GgufFile::Open(spm_path));
  ASSERT_TRUE(spm.ok()) << spm.status();
  EXPECT_EQ(spm->size(), 32000u);
  EXPECT_EQ(spm->bos, 1);
  EXPECT_EQ(spm->eos, 2);
  EXPECT_EQ(spm->unk, 0);
  EXPECT_TRUE(spm->add_bos);
  EXPECT_TRUE(spm->add_space_prefix);
  EXPECT_EQ(spm->type(13), TokenType::kByte);  // <0x0A>
  auto bpe = LoadVocab(**GgufFile::Open(bpe_path));
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ(bpe->size(), 50257u);
  EXPECT_EQ(bpe->merges.size(), 50000u);
  EXPECT_EQ(bpe->bos, 50256);
  EXPECT_EQ(bpe->eot, 50256);  // "<|endoftext|>"
  EXPECT_FALSE(bpe->add_bos);
}

}  // namespace
}  // namespace kvault
