#include "model/unicode_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kvault {
namespace {

using std::string_literals::operator""s;

TEST(Utf8LeadLengthTest, FollowsTheHighNibble) {
  EXPECT_EQ(Utf8LeadLength('a'), 1u);
  EXPECT_EQ(Utf8LeadLength(0x80), 1u);  // a stray continuation byte
  EXPECT_EQ(Utf8LeadLength(0xC3), 2u);
  EXPECT_EQ(Utf8LeadLength(0xE2), 3u);
  EXPECT_EQ(Utf8LeadLength(0xF0), 4u);
  EXPECT_EQ(Utf8LeadLength(0xFF), 4u);
}

TEST(DecodeUtf8AtTest, DecodesWellFormedSequences) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // aé€😀
  Utf8Decoded d = DecodeUtf8At(text, 0);
  EXPECT_EQ(d.step, Utf8Step::kValid);
  EXPECT_EQ(d.code_point, U'a');
  d = DecodeUtf8At(text, 1);
  EXPECT_EQ(d.code_point, U'\u00E9');
  EXPECT_EQ(d.num_bytes, 2u);
  d = DecodeUtf8At(text, 3);
  EXPECT_EQ(d.code_point, U'\u20AC');
  EXPECT_EQ(d.num_bytes, 3u);
  d = DecodeUtf8At(text, 6);
  EXPECT_EQ(d.code_point, U'\U0001F600');
  EXPECT_EQ(d.num_bytes, 4u);
}

TEST(DecodeUtf8AtTest, RejectsIllFormedSequences) {
  for (const std::string& bad :
       {"\x80"s, "\xC0\x80"s, "\xC1\xBF"s, "\xE0\x80\x80"s, "\xED\xA0\x80"s,
        "\xF4\x90\x80\x80"s, "\xF5\x80\x80\x80"s, "\xFF"s, "\xE2\x28\xAC"s}) {
    SCOPED_TRACE(testing::PrintToString(bad));
    const Utf8Decoded d = DecodeUtf8At(bad, 0);
    EXPECT_EQ(d.step, Utf8Step::kInvalid);
    EXPECT_EQ(d.num_bytes, 1u);
  }
}

TEST(DecodeUtf8AtTest, TellsTruncatedFromInvalid) {
  Utf8Decoded d = DecodeUtf8At("\xE2\x82", 0);
  EXPECT_EQ(d.step, Utf8Step::kIncomplete);
  EXPECT_EQ(d.num_bytes, 2u);
  d = DecodeUtf8At("\xF0", 0);
  EXPECT_EQ(d.step, Utf8Step::kIncomplete);
  EXPECT_EQ(d.num_bytes, 1u);
  // A string_view that ends early must not be read past, even if the bytes
  // behind it would complete the character.
  const std::string whole = "\xE2\x82\xAC";
  d = DecodeUtf8At(std::string_view(whole).substr(0, 2), 0);
  EXPECT_EQ(d.step, Utf8Step::kIncomplete);
}

TEST(DecodeUtf8LenientTest, ReplacesBadBytesLikeLlamaCpp) {
  EXPECT_EQ(DecodeUtf8Lenient("a\xFF"
                              "b"),
            (std::vector<char32_t>{U'a', kReplacementChar, U'b'}));
  // Overlongs and surrogates pass the top-bit checks.
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\x80"s), (std::vector<char32_t>{0}));
  EXPECT_EQ(DecodeUtf8Lenient("\xED\xA0\x80"), (std::vector<char32_t>{0xD800}));
  // Truncated: each byte on its own.
  EXPECT_EQ(DecodeUtf8Lenient("\xE2\x82"),
            (std::vector<char32_t>{kReplacementChar, kReplacementChar}));
  // Above U+10FFFF: the lead byte is replaced, then the continuations.
  EXPECT_EQ(DecodeUtf8Lenient("\xF4\x90\x80\x80").size(), 4u);
  EXPECT_TRUE(DecodeUtf8Lenient("").empty());
}

TEST(AppendUtf8Test, RoundTripsEveryLength) {
  for (char32_t cp : {U'\0', U'a', U'\u00E9', U'\u07FF', U'\u0800', U'\uFFFD',
                      U'\U00010000', U'\U0010FFFF'}) {
    const std::string s = EncodeUtf8(cp);
    ASSERT_FALSE(s.empty());
    const Utf8Decoded d = DecodeUtf8At(s, 0);
    EXPECT_EQ(d.step, Utf8Step::kValid);
    EXPECT_EQ(d.code_point, cp);
    EXPECT_EQ(d.num_bytes, s.size());
  }
  EXPECT_EQ(EncodeUtf8(0x110000), "\xEF\xBF\xBD");
}

TEST(SanitizeUtf8Test, ReplacesOnlyWhatIsBroken) {
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo"));
  EXPECT_FALSE(IsValidUtf8("h\xC3"));
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A truncated character at the end becomes one replacement character.
  EXPECT_EQ(SanitizeUtf8("a\xF0\x9F\x98"), "a\xEF\xBF\xBD");
}

TEST(CharCategoryTest, GroupsUnicodeCategories) {
  EXPECT_EQ(GetCharCategory(U'a'), CharCategory::kLetter);
  EXPECT_EQ(GetCharCategory(U'\u00E9'), CharCategory::kLetter);
  EXPECT_EQ(GetCharCategory(U'\u4E2D'), CharCategory::kLetter);  // 中
  EXPECT_EQ(GetCharCategory(U'7'), CharCategory::kNumber);
  EXPECT_EQ(GetCharCategory(U'\u00BD'), CharCategory::kNumber);  // ½ (No)
  EXPECT_EQ(GetCharCategory(U'\u0663'), CharCategory::kNumber);  // Arabic 3
  EXPECT_EQ(GetCharCategory(U'!'), CharCategory::kPunctuation);
  EXPECT_EQ(GetCharCategory(U'\u00AB'), CharCategory::kPunctuation);  // «
  EXPECT_EQ(GetCharCategory(U'$'), CharCategory::kSymbol);
  EXPECT_EQ(GetCharCategory(U'\U0001F600'), CharCategory::kSymbol);
  EXPECT_EQ(GetCharCategory(U'\u0301'), CharCategory::kMark);
  EXPECT_EQ(GetCharCategory(U'\u00A0'), CharCategory::kSeparator);
  EXPECT_EQ(GetCharCategory(U'\n'), CharCategory::kControl);
  EXPECT_EQ(GetCharCategory(U'\u200B'), CharCategory::kControl);  // Cf
  EXPECT_EQ(GetCharCategory(0xD800), CharCategory::kControl);     // Cs
  EXPECT_EQ(GetCharCategory(U'\u0378'), CharCategory::kUnassigned);
  EXPECT_EQ(GetCharCategory(0x110000), CharCategory::kUnassigned);
}

TEST(CharCategoryTest, WhitespaceIsTheWhiteSpaceProperty) {
  for (char32_t cp : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085',
                      U'\u00A0', U'\u1680', U'\u2000', U'\u200A', U'\u2028',
                      U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    EXPECT_TRUE(IsUnicodeWhitespace(cp)) << std::hex << uint32_t(cp);
  }
  for (char32_t cp : {U'a', U'\0', U'\x1C', U'\u200B', U'\u180E', U'\uFEFF'}) {
    EXPECT_FALSE(IsUnicodeWhitespace(cp)) << std::hex << uint32_t(cp);
  }
  EXPECT_TRUE(IsUnicodeLetter(U'Z'));
  EXPECT_TRUE(IsUnicodeNumber(U'\u2167'));  // Roman numeral VIII (Nl)
  EXPECT_TRUE(IsUnicodePunctuation(U'_'));
}

// Seeded random bytes: the decoders never over-read (ASan checks) and their
// outputs stay consistent with each other.
TEST(Utf8FuzzTest, RandomBytesDecodeConsistently) {
  const uint32_t seed = 20240605;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::string sanitized = SanitizeUtf8(bytes);
    EXPECT_TRUE(IsValidUtf8(sanitized));
    if (IsValidUtf8(bytes)) {
      EXPECT_EQ(sanitized, bytes);
    }
    std::string reencoded;
    for (char32_t cp : DecodeUtf8Lenient(bytes)) AppendUtf8(cp, &reencoded);
    // Lenient decoding keeps every well-formed character.
    if (IsValidUtf8(bytes)) {
      EXPECT_EQ(reencoded, bytes);
    }
  }
}

}  // namespace
}  // namespace kvault
