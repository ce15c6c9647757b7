#include "model/spm_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/vocab.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;

// <unk>, <s>, </s>, optionally the 256 byte tokens <0x00>..<0xFF>, then
// `pieces` (normal tokens with their scores), with SentencePiece defaults.
Vocab MakeSpmVocab(const std::vector<std::pair<std::string, float>>& pieces,
                   bool with_byte_tokens = true) {
  Vocab v;
  v.kind = VocabKind::kSpm;
  auto add = [&v](std::string text, TokenType type, float score) {
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0);
  add("<s>", TokenType::kControl, 0);
  add("</s>", TokenType::kControl, 0);
  if (with_byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(name, TokenType::kByte, 0);
    }
  }
  for (const auto& [text, score] : pieces) add(text, TokenType::kNormal, score);
  EXPECT_TRUE(ApplyVocabDefaults(&v).ok());
  EXPECT_TRUE(v.Validate().ok()) << v.Validate();
  return v;
}

// Owns a vocabulary, its lookup and the tokenizer over them.
class SpmFixture {
 public:
  explicit SpmFixture(Vocab vocab)
      : vocab_(std::move(vocab)),
        lookup_(BuildTokenLookup(vocab_)),
        spm_(vocab_, lookup_) {}
  std::vector<TokenId> Encode(std::string_view text) const {
    std::vector<TokenId> out;
    spm_.Encode(text, &out);
    return out;
  }
  TokenId Id(const std::string& text) const { return lookup_.at(text); }
  const SpmTokenizer& spm() const { return spm_; }

 private:
  Vocab vocab_;
  TokenLookup lookup_;
  SpmTokenizer spm_;
};

TEST(SpmTokenizerTest, MergesTheHighestScoringPairFirst) {
  SpmFixture t(
      MakeSpmVocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -2}}));
  // "bc" outscores "ab", and "abc" is no token: a + bc.
  EXPECT_THAT(t.Encode("abc"), ElementsAre(t.Id("a"), t.Id("bc")));
  SpmFixture with_abc(MakeSpmVocab(
      {{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -2}, {"abc", -9}}));
  EXPECT_THAT(with_abc.Encode("abc"), ElementsAre(with_abc.Id("abc")));
}

TEST(SpmTokenizerTest, EqualScoresMergeLeftmostFirst) {
  SpmFixture t(MakeSpmVocab({{"a", -1}, {"aa", -1}}));
  EXPECT_THAT(t.Encode("aaa"), ElementsAre(t.Id("aa"), t.Id("a")));
  EXPECT_THAT(t.Encode("aaaa"), ElementsAre(t.Id("aa"), t.Id("aa")));
}

TEST(SpmTokenizerTest, SpacesBecomeLowerBlocks) {
  SpmFixture t(MakeSpmVocab({{"\xE2\x96\x81", -1},
                             {"a", -1},
                             {"b", -1},
                             {"\xE2\x96\x81"
                              "b",
                              -1}}));
  EXPECT_THAT(t.Encode("a b"), ElementsAre(t.Id("a"), t.Id("\xE2\x96\x81"
                                                           "b")));
  EXPECT_THAT(t.Encode("  "),
              ElementsAre(t.Id("\xE2\x96\x81"), t.Id("\xE2\x96\x81")));
  EXPECT_TRUE(t.Encode("").empty());
}

TEST(SpmTokenizerTest, UnknownCharactersFallBackToBytes) {
  SpmFixture t(MakeSpmVocab({{"a", -1}}));
  EXPECT_THAT(t.Encode("a\xC3\xA9"),
              ElementsAre(t.Id("a"), t.Id("<0xC3>"), t.Id("<0xA9>")));
  // Invalid and truncated UTF-8 are bytes too; nothing is lost.
  EXPECT_THAT(t.Encode("\xFF"), ElementsAre(t.Id("<0xFF>")));
  EXPECT_THAT(t.Encode("\xE2\x82"),
              ElementsAre(t.Id("<0xE2>"), t.Id("<0x82>")));
  EXPECT_EQ(t.spm().ByteToken(0x41), t.Id("<0x41>"));
}

TEST(SpmTokenizerTest, WithoutByteTokensUnknownIsUsed) {
  SpmFixture t(MakeSpmVocab({{"a", -1}}, /*with_byte_tokens=*/false));
  EXPECT_THAT(t.Encode("a\xC3\xA9"), ElementsAre(t.Id("a"), 0, 0));
}

TEST(SpmHelpersTest, EscapeAndByteTokens) {
  EXPECT_EQ(SpmEscapeSpaces(" a  b"),
            "\xE2\x96\x81"
            "a\xE2\x96\x81\xE2\x96\x81"
            "b");
  EXPECT_EQ(SpmUnescapeSpaces("\xE2\x96\x81"
                              "a\xE2\x96\x81"),
            " a ");
  EXPECT_EQ(ParseByteToken("<0x0A>"), 0x0A);
  EXPECT_EQ(ParseByteToken("<0xff>"), 0xFF);
  EXPECT_EQ(ParseByteToken("<0xG0>"), std::nullopt);
  EXPECT_EQ(ParseByteToken("<0x0A"), std::nullopt);
  EXPECT_EQ(ParseByteToken("a"), std::nullopt);
}

// Speed is a benchmark's business; this checks a long text tokenizes fully.
TEST(SpmTokenizerTest, HundredKilobytesOfTextTokenize) {
  std::vector<std::pair<std::string, float>> pieces = {{"\xE2\x96\x81", -1}};
  for (char a = 'a'; a <= 'z'; ++a) {
    pieces.push_back({std::string(1, a), -2});
    pieces.push_back({"\xE2\x96\x81" + std::string(1, a), -3});
    for (char b = 'a'; b <= 'z'; ++b) {
      pieces.push_back({std::string{a, b}, -float((a * 31 + b) % 17) - 4});
    }
  }
  SpmFixture t(MakeSpmVocab(pieces));
  std::mt19937 rng(1);
  std::string text;
  while (text.size() < 100 * 1024) {
    text += (rng() % 6 == 0) ? ' ' : static_cast<char>('a' + rng() % 26);
  }
  const std::vector<TokenId> ids = t.Encode(text);
  EXPECT_GT(ids.size(), text.size() / 4);
}

}  // namespace
}  // namespace kvault
