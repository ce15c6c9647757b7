#include "server/infill.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/bpe_tokenizer.h"
#include "model/unicode_text.h"

namespace kvault {
namespace {

using nlohmann::json;

// A byte-level vocabulary without merges (one token per byte: ids are the
// byte values) plus the FIM tokens, so token counts are character counts.
class InfillTest : public testing::Test {
 protected:
  void SetUp() override { tokenizer_ = Make(true); }

  static std::unique_ptr<Tokenizer> Make(bool with_fim) {
    Vocab v;
    v.kind = VocabKind::kBpe;
    v.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
      v.tokens.push_back(EncodeUtf8(ByteToUnicode(static_cast<uint8_t>(b))));
    }
    for (const char* t : {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                          "<|fim_repo|>", "<|file_sep|>"}) {
      v.tokens.push_back(t);
    }
    EXPECT_TRUE(ApplyVocabDefaults(&v).ok());
    if (with_fim) {
      v.fim_pre = 256, v.fim_suf = 257, v.fim_mid = 258, v.fim_rep = 259,
      v.fim_sep = 260;
    }
    auto t = Tokenizer::Create(std::move(v));
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }

  std::vector<TokenId> Bytes(const std::string& s) const {
    return std::vector<TokenId>(s.begin(), s.end());
  }

  std::vector<TokenId> Prompt(const json& body, InfillShape shape) {
    CompletionLimits limits;
    limits.n_ctx_slot = 256;
    auto r = ParseInfillRequest(body, *tokenizer_, limits, shape);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->params.prompt : std::vector<TokenId>();
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(InfillTest, RepositoryLayoutAndBatchCuts) {
  const json body{{"input_prefix", "abcdefghijklmnopqrstuvwxyz"},
                  {"input_suffix", "0123456789"},
                  {"prompt", "Q"},
                  {"input_extra", {{{"filename", "a.py"}, {"text", "print"}}}}};
  // Prefix: its last 3/4 of 16; suffix: 16/4 - (2 + 1 prompt token) = 1.
  std::vector<TokenId> want = {259};
  for (TokenId t : Bytes("myproject\n")) want.push_back(t);
  want.push_back(260);
  for (TokenId t : Bytes("a.py\nprint")) want.push_back(t);
  want.push_back(260);
  for (TokenId t : Bytes("filename\n")) want.push_back(t);
  want.push_back(256);
  for (TokenId t : Bytes("opqrstuvwxyzQ")) want.push_back(t);
  want.push_back(257);
  want.push_back('0');
  want.push_back(258);
  EXPECT_EQ(Prompt(body, InfillShape{16, -1, 256, false}), want);
}

TEST_F(InfillTest, SpmPutsTheSuffixFirstAndExtraFillsOnlyTheRoom) {
  const json body{{"input_prefix", "ab"}, {"input_suffix", "cd"},
                  {"input_extra", {{{"text", "xyz"}}}}};
  // n_ctx - n_batch - 2 * n_predict = 40 - 16 - 20 = 4: the last 4 extra
  // tokens ("tmp\n" is the default filename).
  const std::vector<TokenId> got = Prompt(body, InfillShape{16, 10, 40, true});
  std::vector<TokenId> tail_of_extra(got.begin(), got.begin() + 4);
  EXPECT_EQ(tail_of_extra, Bytes("ame\n"));
  std::vector<TokenId> rest(got.begin() + 4, got.end());
  EXPECT_EQ(rest, (std::vector<TokenId>{257, 'c', 'd', 256, 'a', 'b', 258}));
}

TEST_F(InfillTest, ModelWithoutFimTokensIsNotSupported) {
  auto plain = Make(false);
  auto r = ParseInfillRequest(json{{"input_prefix", "a"}}, *plain,
                              CompletionLimits{}, InfillShape{});
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("prefix token is missing"),
            std::string::npos);
}

TEST_F(InfillTest, BadFieldsAreNamed) {
  CompletionLimits limits;
  auto r = ParseInfillRequest(json{{"input_extra", "x"}}, *tokenizer_, limits,
                              InfillShape{});
  EXPECT_NE(r.status().message().find("input_extra"), std::string::npos);
  r = ParseInfillRequest(json{{"input_extra", {{{"text", 3}}}}}, *tokenizer_,
                         limits, InfillShape{});
  EXPECT_NE(r.status().message().find("text"), std::string::npos);
}

}  // namespace
}  // namespace kvault
