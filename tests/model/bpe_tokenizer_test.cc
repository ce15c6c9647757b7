#include "model/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/unicode_text.h"
#include "model/vocab.h"

namespace kvault {
namespace {

using ::testing::ElementsAre;

// A byte-level vocabulary: the 256 byte characters (ids 0..255 in byte
// order), then `extra` tokens, with `merges` in rank order.
Vocab MakeBpeVocab(const std::vector<std::string>& extra,
                   const std::vector<std::string>& merges,
                   std::string pre = "gpt-2") {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b)
    v.tokens.push_back(EncodeUtf8(ByteToUnicode(b)));
  for (const std::string& t : extra) v.tokens.push_back(t);
  v.merges = merges;
  EXPECT_TRUE(ApplyVocabDefaults(&v).ok());
  EXPECT_TRUE(v.Validate().ok()) << v.Validate();
  return v;
}

class BpeFixture {
 public:
  explicit BpeFixture(Vocab vocab,
                      PreTokenizerInfo pre = {PreTokenizerType::kGpt2, false,
                                              false})
      : vocab_(std::move(vocab)),
        lookup_(BuildTokenLookup(vocab_)),
        bpe_(vocab_, lookup_, pre) {}
  std::vector<TokenId> Encode(std::string_view text) const {
    std::vector<TokenId> out;
    bpe_.Encode(text, &out);
    return out;
  }
  TokenId Id(const std::string& text) const { return lookup_.at(text); }
  const BpeTokenizer& bpe() const { return bpe_; }

 private:
  Vocab vocab_;
  TokenLookup lookup_;
  BpeTokenizer bpe_;
};

TEST(ByteLevelTest, Gpt2ByteToUnicodeTable) {
  EXPECT_EQ(ByteToUnicode('!'), U'!');
  EXPECT_EQ(ByteToUnicode('~'), U'~');
  EXPECT_EQ(ByteToUnicode(0xE9), U'\u00E9');
  EXPECT_EQ(ByteToUnicode(0x00), U'\u0100');
  EXPECT_EQ(ByteToUnicode('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(ByteToUnicode(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(ByteToUnicode(0x7F), U'\u0121');
  EXPECT_EQ(ByteToUnicode(0xAD), U'\u0143');  // the last of the 68
  EXPECT_EQ(UnicodeToByte(U'\u0120'), ' ');
  EXPECT_EQ(UnicodeToByte(U'\u0144'), -1);
  EXPECT_EQ(UnicodeToByte(U'\u4E16'), -1);
}

TEST(ByteLevelTest, EncodeDecodeRoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string encoded = ByteLevelEncode(all);
  EXPECT_TRUE(IsValidUtf8(encoded));
  EXPECT_EQ(ByteLevelDecode(encoded), all);
  EXPECT_EQ(ByteLevelEncode(" hi"), "\xC4\xA0hi");
  // Characters outside the alphabet are kept as they are.
  EXPECT_EQ(ByteLevelDecode("\xE4\xB8\x96"), "\xE4\xB8\x96");
}

TEST(BpeTokenizerTest, MergesByRank) {
  // "bc" ranks before "ab": a + bc, then (a, bc) if that merge exists.
  BpeFixture bc_first(MakeBpeVocab({"ab", "bc"}, {"b c", "a b"}));
  EXPECT_THAT(bc_first.Encode("abc"),
              ElementsAre(bc_first.Id("a"), bc_first.Id("bc")));
  BpeFixture ab_first(MakeBpeVocab({"ab", "bc"}, {"a b", "b c"}));
  EXPECT_THAT(ab_first.Encode("abc"),
              ElementsAre(ab_first.Id("ab"), ab_first.Id("c")));
  BpeFixture full(MakeBpeVocab({"ab", "bc", "abc"}, {"b c", "a b", "a bc"}));
  EXPECT_THAT(full.Encode("abc"), ElementsAre(full.Id("abc")));
  EXPECT_EQ(full.bpe().MergeRank("a", "bc"), 2);
  EXPECT_EQ(full.bpe().MergeRank("ab", "c"), -1);
}

TEST(BpeTokenizerTest, EqualRanksMergeLeftmostFirst) {
  BpeFixture t(MakeBpeVocab({"aa"}, {"a a"}));
  EXPECT_THAT(t.Encode("aaa"), ElementsAre(t.Id("aa"), t.Id("a")));
}

TEST(BpeTokenizerTest, WordsAreMergedSeparately) {
  BpeFixture t(MakeBpeVocab({"\xC4\xA0"
                             "a",
                             "ab"},
                            {"\xC4\xA0 a", "a b"}));
  // " ab" is one word; "Ġa" ranks first so "ab" cannot form.
  EXPECT_THAT(t.Encode("ab ab"), ElementsAre(t.Id("ab"),
                                             t.Id("\xC4\xA0"
                                                  "a"),
                                             t.Id("b")));
}

TEST(BpeTokenizerTest, UnmappedPieceFallsBackToSingleBytes) {
  // "a b" merges into a piece that is not in the vocabulary.
  BpeFixture t(MakeBpeVocab({}, {"a b"}));
  EXPECT_THAT(t.Encode("ab"), ElementsAre(t.Id("a"), t.Id("b")));
}

TEST(BpeTokenizerTest, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token no merge sequence reaches.
  Vocab v = MakeBpeVocab({"abc"}, {});
  BpeFixture merging(v);
  EXPECT_EQ(merging.Encode("abc").size(), 3u);
  BpeFixture whole(v, {PreTokenizerType::kLlama3, true, true});
  EXPECT_THAT(whole.Encode("abc"), ElementsAre(whole.Id("abc")));
}

TEST(BpeTokenizerTest, AnyBytesEncodeWithoutLoss) {
  BpeFixture t(MakeBpeVocab({}, {}));
  // Valid text: one token per byte; invalid bytes become U+FFFD first.
  EXPECT_EQ(t.Encode("h\xC3\xA9").size(), 3u);
  EXPECT_EQ(t.Encode("\xFF").size(), 3u);  // EF BF BD
  EXPECT_TRUE(t.Encode("").empty());
}

}  // namespace
}  // namespace kvault
